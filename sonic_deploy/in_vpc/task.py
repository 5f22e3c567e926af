"""Inside one probe task (`sonic-deploy probe ... --in-vpc-task URL --task-index I --task-count N`): announce
that it is ready, then run each command the runner publishes, uploading what it measured, until "done".

A level is run as a worker process of a local run is (workers.py): `run_level(settings, level, I, N, ...)`,
this task's share of it, from the start the runner chose, so that the N tasks load the target together."""

from __future__ import annotations

import json
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sonic_deploy.in_vpc.protocol import (
    RUN,
    STOP,
    CommandError,
    ObjectStore,
    RunManifest,
    command_key,
    encode_stats,
    failed_key,
    get_json,
    level_of,
    local_start,
    part_key,
    put_json,
    ready_key,
    samples_key,
    start_of,
    stats_key,
)
from sonic_deploy.probe.level import Level
from sonic_deploy.probe.load import ProbeSettings

# What a task does with one command: run it, emitting each sample, and return what goes in stats.json. The
# event is set when the runner puts stop.json: the command ends between two requests (or calls).
RunCommand = Callable[[dict[str, Any], Callable[[dict[str, Any]], None], threading.Event], dict[str, Any]]


# A command's samples so far go up this often while it runs (a part; the whole goes up at its end).
PART_EVERY_S = 10.0


class RunnerGoneError(Exception):
    """No command within the run's idle timeout: the runner is gone (it stops its tasks in every other case)."""


class StoppedError(Exception):
    """The runner put stop.json, or ECS stops the task (SIGTERM): the run ended early, and this task stops."""


def _say(text: str) -> None:
    # The task's log (CloudWatch Logs, through the task definition's log driver): one line a step.
    print(f"probe task: {text}", file=sys.stderr, flush=True)


class Terminated:
    """Set by the SIGTERM handler, read by the loops: a plain attribute, no lock. A handler runs on the main
    thread between bytecodes, possibly inside a `threading.Event.wait` that holds the event's own lock:
    `Event.set()` there would wait for that lock forever."""

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


@contextmanager
def _on_sigterm(terminated: Terminated) -> Iterator[None]:
    """ECS's StopTask is a SIGTERM, then a SIGKILL 30 s later (the container's stopTimeout; "StopTask", ECS
    API Reference). Without a handler Python would end at once (the task definition's init process is PID 1
    and passes the signal on) and upload nothing of the command under way. The handler only sets
    `terminated`; the watcher then uploads the samples so far and stops the command, as stop.json does, and
    `serve` uploads the whole. Only the main thread may set a handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: terminated.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _wait_for(store: ObjectStore, key: str, manifest: RunManifest, terminated: Terminated) -> dict[str, Any]:
    deadline = time.monotonic() + manifest.idle_timeout_s
    if terminated.is_set():  # a SIGTERM while the last command's results were being put
        raise StoppedError()
    while (found := get_json(store, key)) is None:
        if terminated.is_set() or store.get(STOP) is not None:
            raise StoppedError()
        if time.monotonic() > deadline:
            raise RunnerGoneError(
                f"no {key} within {manifest.idle_timeout_s:g} s: the runner is gone, stopping"
            )
        time.sleep(manifest.poll_s)  # resumed after the handler (PEP 475): at most one poll late
    if not isinstance(found, dict):
        raise CommandError(f"{key} is not a JSON object")
    result: dict[str, Any] = found
    return result


@contextmanager
def _watching(
    store: ObjectStore,
    poll_s: float,
    seq: int,
    index: int,
    samples: list[dict[str, Any]],
    terminated: Terminated,
) -> Iterator[threading.Event]:
    """While a command runs, on a thread of its own: an event set once the runner puts stop.json or ECS
    stops the task (`terminated`, by SIGTERM), looked at every `poll_s` (the command's loop checks it between
    requests), and the samples so far uploaded every PART_EVERY_S as a part
    (results/<seq>/<index>/part-<n>.jsonl), and once more when it stops, so that a run interrupted
    mid-command keeps what finished (`InVpcRun.partial`)."""
    stop, finished = threading.Event(), threading.Event()
    uploaded, part, at = 0, 0, time.monotonic()

    def upload_part() -> None:
        nonlocal uploaded, part, at
        upto = len(samples)  # list.append is atomic: the first `upto` are complete
        if upto > uploaded:
            body = "".join(json.dumps({**s, "task": index}) + "\n" for s in samples[uploaded:upto])
            store.put(part_key(seq, index, part), body.encode())
            uploaded, part = upto, part + 1
        at = time.monotonic()

    def watch() -> None:
        while not finished.wait(poll_s):
            try:
                if time.monotonic() - at >= PART_EVERY_S:
                    upload_part()
                if terminated.is_set() or store.get(STOP) is not None:
                    stop.set()  # first: an upload that fails must not keep the command running
                    try:
                        upload_part()
                    except Exception as error:
                        _say(f"could not upload a part: {error!r}")
                    return
            except Exception as error:  # a failed look is not a stop; the next one may work
                _say(f"could not look for {STOP} or upload a part: {error!r}")

    watcher = threading.Thread(target=watch, name="stop-watcher", daemon=True)
    watcher.start()
    try:
        yield stop
    finally:
        finished.set()
        watcher.join()


def serve(store: ObjectStore, index: int, count: int, run_command: RunCommand) -> int:
    """The task's life: ready, then each command in turn. 0 after "done" or stop.json; 1 after a failure
    (a command it refuses too), which is also put where the runner looks (failed/INDEX.json), so that it stops
    the run and says why. A SIGTERM (ECS's StopTask) stops it as stop.json does: what the command under way
    measured is uploaded (a part, then the whole) before it exits, within the 30 s before ECS's SIGKILL."""
    terminated = Terminated()
    with _on_sigterm(terminated):
        return _serve(store, index, count, run_command, terminated)


def _serve(
    store: ObjectStore, index: int, count: int, run_command: RunCommand, terminated: Terminated
) -> int:
    try:
        manifest = RunManifest.from_json(_wait_for(store, RUN, RunManifest("", 0, 0.2, 300.0), terminated))
        problem = manifest.problem(count)
        if problem is not None:
            raise CommandError(f"refused: {problem}")
        put_json(store, ready_key(index), {"index": index, "host": socket.gethostname(), "at": time.time()})
        _say(f"task {index} of {manifest.task_count} ready ({store.where()})")
        seq = 0
        while (command := _wait_for(store, command_key(seq), manifest, terminated)).get("kind") != "done":
            samples: list[dict[str, Any]] = []
            with _watching(store, manifest.poll_s, seq, index, samples, terminated) as stop:
                result = run_command(command, samples.append, stop)
            lines = "".join(json.dumps({**sample, "task": index}) + "\n" for sample in samples)
            store.put(samples_key(seq, index), lines.encode())
            put_json(store, stats_key(seq, index), result)  # last: the runner waits for it
            _say(f"command {seq} ({command['kind']}): {len(samples)} samples uploaded")
            if stop.is_set():
                raise StoppedError()
            seq += 1
        _say("done")
        return 0
    except StoppedError:
        _say("stopped: SIGTERM (ECS StopTask)" if terminated.is_set() else f"stopped: the runner put {STOP}")
        return 0
    except Exception as error:  # the runner must hear of it, whatever it is
        _say(f"failed: {error!r}")
        try:
            put_json(store, failed_key(index), {"index": index, "error": repr(error)})
        except Exception as also:
            _say(f"could not report the failure either: {also!r}")
        return 1


def command_start(command: dict[str, Any], kind: str) -> float:
    """The command's start as this process's perf_counter, once it is the kind this task runs and its start
    is within the window (CommandError otherwise)."""
    if command.get("kind") != kind:
        raise CommandError(f"a {kind} task got a {str(command.get('kind'))[:40]!r} command")
    return local_start(start_of(command, time.time()))


def level_runner(
    settings: ProbeSettings, index: int, count: int, permitted: Callable[[Level], str | None]
) -> RunCommand:
    """Each level command: this task's share of it, from the runner's start time. `permitted`: why the
    task's own options would not make this level (None: they would), so that a forged command is refused."""
    from sonic_deploy import event_loop
    from sonic_deploy.probe.load import run_level

    def run_command(
        command: dict[str, Any], emit: Callable[[dict[str, Any]], None], stop: threading.Event
    ) -> dict[str, Any]:
        start = command_start(command, "level")
        level = level_of(command)
        problem = permitted(level)
        if problem is not None:
            raise CommandError(f"refused level {level.index}: {problem}")
        late_s = max(0.0, time.perf_counter() - start)
        began = time.time() + max(0.0, start - time.perf_counter())  # this task's clock
        stats = event_loop.run(run_level(settings, level, index, count, emit, start, stop.is_set))
        return {
            "stats": encode_stats(stats.encode()),
            "late_s": round(late_s, 3),
            "started_at": round(began, 3),
            "ended_at": round(time.time(), 3),
        }

    return run_command
