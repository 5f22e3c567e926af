"""A turn run: simulated calls, closed loop (so many at once) or open loop (calls arriving at a rate), and
what it leaves behind: samples.jsonl (one line per turn, flushed as it ends), summary.json (percentiles per
hop and for the turn, errors by hop and kind, the budget's verdict) and waterfall.png."""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from sonic_deploy.probe.level import evenly, proportional
from sonic_deploy.probe.output import client_facts
from sonic_deploy.turn.budget import PERCENTILES, Budget, judge
from sonic_deploy.turn.call import HOPS, CallPlan, Hops, run_call

SAMPLES, SUMMARY, WATERFALL = "samples.jsonl", "summary.json", "waterfall.png"


@dataclass(frozen=True)
class Load:
    """Closed loop: `concurrency` calls at once, `calls` in all. Open loop: calls arriving at `rate` a
    second (Poisson, seeded) for `duration_s`, each started when it is due whatever the others do."""

    calls: int = 1
    concurrency: int = 1
    rate: float | None = None
    duration_s: float = 60.0
    seed: int = 1
    # Closed loop: the slots start evenly over this many seconds. Calls started together keep in step (their
    # frames, turns and requests all due at the same instants), a burst no real set of calls makes.
    ramp_up_s: float = 2.0

    # The task this load is the share of, and how many share it (probe turn --in-vpc): its slots start
    # offset by task/tasks of a slot's step, so that N tasks do not start N calls together.
    task: int = 0
    tasks: int = 1

    def share(self, index: int, count: int) -> Load:
        """Task `index` of `count`'s part (probe turn --in-vpc): the parts add up to the whole. Closed loop:
        the calls at once split as evenly as they go, the calls in all in proportion to them (as
        `Level.share` splits a level's requests: every task runs for about as long, a task with no slot gets
        no call); open loop: 1/count of the rate, on a seed of its own (independent Poisson arrivals add up
        to the rate)."""
        if self.rate is not None:
            return replace(self, rate=self.rate / count, seed=self.seed + index, task=index, tasks=count)
        weights = [evenly(self.concurrency, i, count) for i in range(count)]
        return replace(
            self,
            concurrency=weights[index],
            calls=proportional(self.calls, weights, index),
            task=index,
            tasks=count,
        )

    def describe(self) -> dict[str, Any]:
        if self.rate is not None:
            return {"mode": "open", "rate_per_s": self.rate, "duration_s": self.duration_s, "seed": self.seed}
        return {
            "mode": "closed",
            "concurrency": self.concurrency,
            "calls": self.calls,
            "ramp_up_s": self.ramp_up_s,
        }


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    """Nearest rank (the value at rank ceil(p x n)): an observed value, never one between two."""
    ordered = sorted(values)
    result: dict[str, float | None] = {"n": float(len(ordered))}
    for name in PERCENTILES:
        if not ordered:
            result[name] = None
            continue
        fraction = 1.0 if name == "max" else int(name[1:]) / 100
        result[name] = round(ordered[max(0, math.ceil(fraction * len(ordered)) - 1)], 3)
    result["mean"] = round(sum(ordered) / len(ordered), 3) if ordered else None
    return result


def summarize(samples: Sequence[dict[str, Any]], budget: Budget | None) -> dict[str, Any]:
    counted = [line for line in samples if not line["warmup"] and "skipped" not in line]
    done = [line for line in counted if "error" not in line]
    warmup_errors = sum("error" in line for line in samples if line["warmup"])
    hops = {hop: percentiles([line["hops_ms"][hop] for line in done]) for hop in HOPS}
    turn = percentiles([line["turn_ms"] for line in done])
    errors: Counter[str] = Counter(
        f"{line['error']['hop']}:{line['error']['kind']}" for line in counted if "error" in line
    )
    summary: dict[str, Any] = {
        "turns": len(counted),
        "ok": len(done),
        "warmup_turns": sum(line["warmup"] and "skipped" not in line for line in samples),
        "errors": dict(sorted(errors.items())),
        "warmup_errors": warmup_errors,
        "skipped": sum("skipped" in line for line in samples),
        "turn_ms": turn,
        "hops_ms": hops,
        "first_partial_ms": percentiles(
            [line["first_partial_ms"] for line in done if "first_partial_ms" in line]
        ),
        "line_late_ms": percentiles([line["line_late_ms"] for line in counted if "line_late_ms" in line]),
        # Inside the llm hop: the agent's own step from the final transcript to the request on the wire.
        "agent_reaction_ms": percentiles(
            [
                at["llm_request"] - at["final_transcript"]
                for at in (line.get("at_ms", {}) for line in done)
                if "llm_request" in at
            ]
        ),
    }
    if budget is not None:
        summary["budget"] = judge(budget, hops, turn)
    return summary


class TurnOutput:
    def __init__(
        self,
        out_dir: Path,
        progress: TextIO | None,
        on_line: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        """`on_line`: called with each turn as it finishes (an in-VPC task's `emit`: its watcher uploads the
        turns so far as parts while the command runs, which a runner interrupted mid-run collects)."""
        out_dir.mkdir(parents=True, exist_ok=True)
        # A live line on a terminal; in a log (CI, a pipe), nothing until the summary.
        self.out_dir = out_dir
        self._progress = progress if progress is not None and progress.isatty() else None
        self._samples = (out_dir / SAMPLES).open("w", encoding="utf-8")
        self._on_line = on_line
        self.lines: list[dict[str, Any]] = []

    def emit(self, line: dict[str, Any]) -> None:
        self.lines.append(line)
        self._samples.write(json.dumps(line) + "\n")
        self._samples.flush()  # a run stopped halfway keeps every turn it finished
        if self._on_line is not None:
            self._on_line(line)
        if self._progress is not None:
            done = [item for item in self.lines if not item["warmup"] and "turn_ms" in item]
            failed = sum("error" in item for item in self.lines if not item["warmup"])
            last = f", last turn {line['turn_ms']:.0f} ms" if "turn_ms" in line else ""
            self._progress.write(f"\r\x1b[Kturns: {len(done)} timed, {failed} failed{last}")
            self._progress.flush()

    def close(self) -> None:
        self._samples.close()
        if self._progress is not None:
            self._progress.write("\n")


async def run(
    hops: Hops, plan: CallPlan, load: Load, output: TurnOutput, stopped: Callable[[], bool] | None = None
) -> None:
    """The load's calls, to their end; `stopped` (an in-VPC task told to stop): once it is true, no call
    begins and those under way are cancelled (their finished turns are kept)."""
    calls: list[asyncio.Task[None]] = []
    halted = stopped or (lambda: False)
    try:
        if load.rate is None:
            numbers = iter(range(load.calls))

            slots = min(load.concurrency, load.calls)

            async def slot(index: int) -> None:
                await asyncio.sleep(load.ramp_up_s * (index + load.task / load.tasks) / slots)
                for number in numbers:
                    if halted():
                        return
                    await run_call(number, hops, plan, output.emit)

            calls = [asyncio.create_task(slot(index)) for index in range(slots)]
        else:
            chance, started, number = random.Random(load.seed), time.perf_counter(), 0
            due = 0.0
            while not halted():
                due += chance.expovariate(load.rate)
                if due > load.duration_s:
                    break
                wait = started + due - time.perf_counter()
                if wait > 0:
                    await asyncio.sleep(wait)
                calls.append(asyncio.create_task(run_call(number, hops, plan, output.emit)))
                number += 1
        if stopped is None:
            await asyncio.gather(*calls)
        else:
            every: asyncio.Future[Any] = asyncio.gather(*calls)

            async def watch() -> None:
                while not halted():
                    await asyncio.sleep(0.2)

            watcher: asyncio.Future[Any] = asyncio.ensure_future(watch())
            await asyncio.wait({every, watcher}, return_when=asyncio.FIRST_COMPLETED)
            watcher.cancel()
            if every.done():
                every.result()
    finally:
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        await hops.llm.close()
        await hops.tts.close()


def write_summary(out_dir: Path, summary: dict[str, Any], described: dict[str, Any]) -> Path:
    path = out_dir / SUMMARY
    path.write_text(
        json.dumps({**described, **summary, "client": client_facts()}, indent=2) + "\n", encoding="utf-8"
    )
    return path


def summary_text(summary: dict[str, Any]) -> str:
    """The table printed at the end of a run: p50, p95 and p99 of each hop and of the turn."""
    rows = [f"{'':<18}{'p50':>9}{'p95':>9}{'p99':>9}{'max':>9}"]
    named = [(hop, summary["hops_ms"][hop]) for hop in HOPS] + [("turn", summary["turn_ms"])]
    for name, values in named:
        cells = "".join(
            f"{'-' if values[p] is None else format(values[p], '.1f'):>9}"
            for p in ("p50", "p95", "p99", "max")
        )
        rows.append(f"{name + ' ms':<18}{cells}")
    rows.append(f"turns timed: {summary['ok']} of {summary['turns']} (and {summary['warmup_turns']} warm-up)")
    if summary["errors"]:
        rows.append("errors: " + ", ".join(f"{kind} x{count}" for kind, count in summary["errors"].items()))
    if summary["warmup_errors"] or summary["skipped"]:
        rows.append(
            f"also: {summary['warmup_errors']} warm-up turns failed, {summary['skipped']} turns not run "
            "(their call's speech-to-text session had ended): samples.jsonl says why"
        )
    if "budget" in summary:
        rows.append(f"budget ({summary['budget']['file']}): {summary['budget']['verdict']}")
    return "\n".join(rows)
