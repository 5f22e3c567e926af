"""The operator's side of `--in-vpc ENV` while its tasks run (fleet.py starts and stops them): wait until
each says it is ready, publish each level, merge what the tasks measured (HDR histograms merge exactly, as
those of local worker processes do: workers.py), and tell them to stop if the run ends early; and the
signals (Ctrl-C, SIGTERM, SIGHUP) that end a run.
"""

from __future__ import annotations

import json
import math
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sonic_deploy.config.errors import one_line
from sonic_deploy.in_vpc.fleet import Fleet, InVpcError
from sonic_deploy.in_vpc.protocol import (
    DONE,
    RUN,
    STOP,
    ObjectStore,
    RunManifest,
    command_key,
    decode_stats,
    get_json,
    level_command,
    put_json,
    samples_key,
    stats_key,
    turn_command,
)
from sonic_deploy.probe.level import Level
from sonic_deploy.probe.stats import LevelStats


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (a closed terminal, an ended SSH session), handled as Ctrl-C is (every task stopped,
    the finished levels kept); exit 128 + the signal's number (143, 129)."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__()
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@dataclass(frozen=True)
class Timing:
    """How often the runner looks, and how long it waits. Tests make them short."""

    poll_s: float = 1.0
    # DescribeTasks this often while waiting (a stopped task is noticed within it).
    describe_every_s: float = 10.0
    # From RunTask to every task ready: Fargate's provisioning, the image pull, the interpreter's start.
    ready_timeout_s: float = 600.0
    # A level starts this long after it is published: every task polls once or more in between.
    start_delay_s: float = 5.0
    # What the tasks poll at, and when they give up on a runner that vanished.
    task_poll_s: float = 1.0
    task_idle_timeout_s: float = 900.0
    # ListTasks again this long after the first stop sweep: a task whose RunTask answer was lost may not be
    # listed at once ("might not be immediately visible to all subsequent commands": RunTask, ECS API
    # reference, eventual consistency).
    relist_after_s: float = 5.0
    # A level's results are awaited for at most its own length (requests x --timeout, or its duration and
    # warm-ups) plus this: a task that hangs without failing cannot hold the run forever.
    collect_grace_s: float = 120.0


class InVpcRun:
    """One run's conversation with its tasks through the store: ready, then each command and its results."""

    def __init__(
        self, fleet: Fleet, store: ObjectStore, count: int, timing: Timing, say: Callable[[str], None]
    ) -> None:
        self.fleet, self.store, self.count, self.timing, self.say = fleet, store, count, timing, say
        self.seq = 0
        self.done = False
        # Per command: each task's facts (late start, its start and end on its clock, its requests), for
        # summary.json's in_vpc block.
        self.facts: list[dict[str, Any]] = []

    def start(self, command: Callable[[int], list[str]]) -> None:
        manifest = RunManifest(
            self.fleet.run_id, self.count, self.timing.task_poll_s, self.timing.task_idle_timeout_s
        )
        put_json(self.store, RUN, manifest.as_json())
        self.fleet.start(self.count, command)
        self._wait_ready()

    def _check_failed(self) -> None:
        for key in self.store.list("failed/"):
            try:
                report = get_json(self.store, key)
            except ValueError:
                report = None
            if not isinstance(report, dict):
                report = {"error": f"{key} is not a JSON object"}
            # What a task wrote, escaped: it reaches the operator's terminal.
            raise InVpcError(
                f"task {one_line(str(report.get('index', '?'))[:20])} failed: "
                f"{one_line(str(report.get('error', '?'))[:2000])}. Fix: read its log; the run's objects are in "
                f"{self.store.where()}"
            )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.timing.ready_timeout_s
        described_at = -math.inf
        shown = ""
        statuses: Counter[str] = Counter()
        while True:
            ready = len(self.store.list("ready/"))
            self._check_failed()
            if time.monotonic() - described_at >= self.timing.describe_every_s:
                tasks = self.fleet.describe()
                self.fleet.check_running(tasks)
                statuses = Counter(str(task.get("lastStatus")) for task in tasks)
                described_at = time.monotonic()
            line = (
                ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()))
                + f"; {ready} of {self.count} ready"
            )
            if line != shown:
                self.say(f"tasks: {line}")
                shown = line
            if ready >= self.count:
                return
            if time.monotonic() > deadline:
                raise InVpcError(
                    f"only {ready} of {self.count} tasks ready after {self.timing.ready_timeout_s:g} s ({line}). Fix: "
                    "read the tasks' log; PROVISIONING for long is Fargate capacity or the subnets' free addresses"
                )
            time.sleep(self.timing.poll_s)

    def _publish(self, command: dict[str, Any]) -> int:
        seq = self.seq
        put_json(self.store, command_key(seq), command)
        self.seq += 1
        return seq

    def _collect(self, seq: int, what: str, within_s: float) -> list[dict[str, Any]]:
        """Each task's stats.json of command `seq` (waiting for all of them, for at most `within_s` and the
        grace), in task order."""
        described_at = began = time.monotonic()
        deadline = began + within_s + self.timing.collect_grace_s
        while True:
            self._check_failed()
            done = {key for key in self.store.list(f"results/{seq}/") if key.endswith("/stats.json")}
            if len(done) >= self.count:
                break
            if time.monotonic() > deadline:
                raise InVpcError(
                    f"{what}: only {len(done)} of {self.count} tasks wrote their results within "
                    f"{deadline - began:.0f} s, the level's own length and {self.timing.collect_grace_s:g} s. Fix: read "
                    f"the tasks' log; the run's objects are in {self.store.where()}"
                )
            if time.monotonic() - described_at >= self.timing.describe_every_s:
                self.fleet.check_running()
                described_at = time.monotonic()
            time.sleep(self.timing.poll_s)
        results = []
        for index in range(self.count):
            key = stats_key(seq, index)
            try:
                result = get_json(self.store, key)
            except ValueError as error:
                raise self._malformed(key, error) from None
            if not isinstance(result, dict):
                raise InVpcError(f"{what}: task {index} wrote no result in {self.store.where()} ({key})")
            results.append(result)
        return results

    def _malformed(self, key: str, error: BaseException) -> InVpcError:
        return InVpcError(
            f"{self.store.where()}{key} is not what a task writes: {one_line(repr(error))[:300]}. Fix: read the "
            "task's log; only the run's tasks may write its results (the bucket policy)"
        )

    def samples(self, seq: int) -> list[dict[str, Any]]:
        """Every task's samples of command `seq`; InVpcError naming the key if one is missing or malformed."""
        lines: list[dict[str, Any]] = []
        for index in range(self.count):
            key = samples_key(seq, index)
            body = self.store.get(key)
            if body is None:
                raise InVpcError(
                    f"task {index} wrote its stats but no {key} in {self.store.where()}. Fix: read its log"
                )
            try:
                for line in body.decode().splitlines():
                    if line.strip():
                        sample = json.loads(line)
                        if not isinstance(sample, dict):
                            raise ValueError(f"a line is not a JSON object: {line[:80]!r}")
                        lines.append(sample)
            except ValueError as error:
                raise self._malformed(key, error) from None
        return lines

    def partial(self) -> list[dict[str, Any]]:
        """After an interruption: the samples of the last command the tasks uploaded so far (whole where a
        task finished, else its parts); never raises (what cannot be read is skipped, and said)."""
        if self.seq == 0 or self.done:
            return []
        seq = self.seq - 1
        lines: list[dict[str, Any]] = []
        for index in range(self.count):
            try:
                keys = [samples_key(seq, index)] if self.store.get(stats_key(seq, index)) is not None else []
                parts = self.store.list(f"results/{seq}/{index}/part-")
                for key in keys or [k for k in parts if k.endswith(".jsonl")]:
                    for line in (self.store.get(key) or b"").decode().splitlines():
                        sample = json.loads(line) if line.strip() else None
                        if isinstance(sample, dict):
                            lines.append(sample)
            except Exception as error:
                self.say(f"could not read task {index}'s samples so far: {one_line(repr(error))[:200]}")
        return lines

    def _note(
        self, seq: int, what: str, results: list[dict[str, Any]], samples: list[dict[str, Any]]
    ) -> None:
        """Each task's facts of command `seq` kept for summary.json, and a note when the tasks began late or
        their spans differ by more than SPAN_SPREAD (one task slower, or starved: the level's load was not
        the whole for its whole length)."""
        measured = Counter(s.get("task") for s in samples if not s.get("warmup"))
        tasks = []
        for index, result in enumerate(results):
            facts: dict[str, Any] = {"task": index, "requests": measured.get(index, 0)}
            for name in ("late_s", "started_at", "ended_at"):
                value = result.get(name)
                facts[name] = (
                    value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
                )
            if facts["started_at"] is not None and facts["ended_at"] is not None:
                facts["span_s"] = round(facts["ended_at"] - facts["started_at"], 3)
            tasks.append(facts)
        self.facts.append({"command": seq, "what": what, "tasks": tasks})
        late = [f"task {t['task']} {t['late_s']:g} s" for t in tasks if (t["late_s"] or 0) > LATE_NOTE_S]
        if late:
            self.say(
                f"note: {what} began late on {', '.join(late)} (it polls every {self.timing.task_poll_s:g} s)"
            )
        spans = [t["span_s"] for t in tasks if t.get("span_s") is not None and t["requests"]]
        spread = max(spans) - min(spans) if len(spans) > 1 else 0.0
        if spread > SPAN_SPREAD_MIN_S and spread / max(spans) > SPAN_SPREAD:
            self.say(
                f"warning: {what}: the tasks' spans differ by more than {SPAN_SPREAD:.0%} ({min(spans):g} s to "
                f"{max(spans):g} s): part of it ran at less than its load (summary.json's in_vpc.commands)"
            )

    def run_level(self, level: Level, timeout_s: float) -> tuple[LevelStats, list[dict[str, Any]]]:
        """Level `level` on every task, from a start a few seconds ahead; the merged stats and all samples.
        `timeout_s`: one request's timeout (--timeout), which bounds how long the level may take."""
        seq = self._publish(level_command(level, time.time() + self.timing.start_delay_s))
        what = f"level {level.index}"
        within = (
            self.timing.start_delay_s + (level.requests + level.warmup + 1) * timeout_s + level.duration_s
        )
        results = self._collect(seq, what, within)
        merged = LevelStats()
        for index, result in enumerate(results):
            try:
                merged.merge(decode_stats(result["stats"]))
            except Exception as error:  # a forged or damaged stats.json: JSON, a missing key, HDR's decode
                raise self._malformed(stats_key(seq, index), error) from None
        samples = sorted(self.samples(seq), key=lambda s: (_number(s.get("time")), _number(s.get("task"))))
        self._note(seq, what, results, samples)
        return merged, samples

    def run_turn(self, within_s: float) -> list[dict[str, Any]]:
        """The turn command on every task; all their turns. `within_s`: how long the calls may take."""
        seq = self._publish(turn_command(time.time() + self.timing.start_delay_s))
        results = self._collect(seq, "the turns", self.timing.start_delay_s + within_s)
        samples = self.samples(seq)
        self._note(seq, "the turns", results, samples)
        return samples

    def finish(self) -> None:
        try:
            self._publish(DONE)
            self.done = True
        except Exception as error:  # the tasks are stopped anyway
            self.say(f"could not publish done: {one_line(str(error))}")

    def stop_tasks(self) -> None:
        """The run ended early: stop.json (each task stops between two requests, or at its next poll) and
        "done" at the next command, so that a task StopTask misses stops itself; never raises."""
        for key, body in ((STOP, {"kind": "stop"}), (command_key(self.seq), DONE)):
            try:
                put_json(self.store, key, body)
            except Exception as error:
                self.say(f"could not put {key}: {one_line(str(error))}")


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


# A task that began more than this late is noted; spans that differ by more than SPAN_SPREAD (and more than
# SPAN_SPREAD_MIN_S: a level of a second differs by a request's length between tasks) are warned of.
LATE_NOTE_S = 0.5
SPAN_SPREAD = 0.10
SPAN_SPREAD_MIN_S = 2.0
# Ctrl-C, SIGTERM (a `kill`, a CI job cancelled) and SIGHUP (the terminal closed): each stops the run.
RUN_SIGNALS = tuple(
    sig for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if sig is not None
)


@contextmanager
def stop_signals() -> Iterator[Callable[[], None]]:
    """One handler for Ctrl-C, SIGTERM and SIGHUP for a whole run: the first raises (KeyboardInterrupt for
    Ctrl-C, `Terminated` for the others), every later one is ignored, as is any after `hold()` (called when
    the tasks are being stopped), so that a second Ctrl-C cannot skip a StopTask. The previous handlers
    come back on exit, after the tasks are stopped. Only the main thread may set a handler."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    state = {"fired": False, "held": False}

    def handler(signum: int, frame: object) -> None:
        if state["fired"] or state["held"]:
            return
        state["fired"] = True
        if signum == signal.SIGINT:
            raise KeyboardInterrupt()
        raise Terminated(signum)

    def hold() -> None:
        state["held"] = True

    previous = {sig: signal.signal(sig, handler) for sig in RUN_SIGNALS}
    try:
        yield hold
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def stderr_say(text: str) -> None:
    print(f"in-vpc: {text}", file=sys.stderr, flush=True)


def run_schedule_in_vpc(conversation: InVpcRun, schedule: Any, sink: Any, timeout_s: float) -> None:
    """The levels of `schedule` (workers.Schedule) on the tasks, as workers.run_schedule runs them on local
    processes: each level's merged statistics go back to the schedule (a --slo search works alike), and
    the samples, all tasks', to the sink (RunOutput: samples.jsonl, summary.json) before the level is done."""
    from sonic_deploy.probe.workers import drive

    def run_one(level: Level) -> LevelStats:
        conversation.say(f"level {level.index}: {_load(level)} on {conversation.count} task(s)")
        stats, samples = conversation.run_level(level, timeout_s)
        for sample in samples:
            sink.record(sample)
        return stats

    drive(schedule, run_one, sink)


def _load(level: Level) -> str:
    return f"concurrency {level.concurrency}" if level.rate is None else f"rate {level.rate:g}/s"
