"""Running levels in this process, or in worker processes whose histograms the parent merges exactly."""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import signal
import threading
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any, Protocol

from sonic_deploy import event_loop
from sonic_deploy.probe.level import Level
from sonic_deploy.probe.load import ProbeSettings, run_level
from sonic_deploy.probe.stats import LevelStats


class LevelSink(Protocol):
    def begin_level(self, level: Level) -> None: ...

    def record(self, record: dict[str, Any]) -> None: ...

    def level_done(self, level: Level, stats: LevelStats) -> None: ...


# Workers begin a level together, this long after the parent says so (time to receive the command).
START_DELAY_S = 0.3


# Levels chosen as they go: each level's merged statistics are sent in, and the next level comes out.
Schedule = Generator[Level, LevelStats, None]


def run_levels(settings: ProbeSettings, levels: Iterable[Level], workers: int, sink: LevelSink) -> None:
    """Run a fixed list of levels in order, in this process or in `workers` processes."""
    run_schedule(settings, fixed(levels), workers, sink)


def run_schedule(settings: ProbeSettings, schedule: Schedule, workers: int, sink: LevelSink) -> None:
    """Run the levels `schedule` yields, one after the other; it is sent each level's merged statistics and
    yields the next level (which may depend on them) or stops: a search, e.g. `capacity_search.SloSearch.levels`.
    It is sent them before the sink is told the level is done, so that what the sink then writes (the summary)
    holds the schedule's verdict on it. Worker processes are started once, for all the levels."""
    if workers <= 1:
        drive(schedule, lambda level: event_loop.run(run_level(settings, level, 0, 1, sink.record)), sink)
        return
    _run_in_processes(settings, schedule, workers, sink)


def fixed(levels: Iterable[Level]) -> Schedule:
    """A fixed list of levels as a schedule (it ignores the statistics it is sent)."""
    # Not `yield from levels`: that would pass each sent value on to the list's iterator, which has no send.
    for level in levels:  # noqa: UP028
        yield level


def drive(schedule: Schedule, run_one: Callable[[Level], LevelStats], sink: LevelSink) -> None:
    """Each level of `schedule` through `run_one`, its merged statistics sent back, the sink told (the
    local processes here, the in-VPC tasks in in_vpc/runner.py)."""
    level = next(schedule, None)
    while level is not None:
        sink.begin_level(level)
        stats = run_one(level)
        try:
            following = schedule.send(stats)
        except StopIteration:
            following = None
        sink.level_done(level, stats)
        level = following


def _worker_main(settings: ProbeSettings, worker: int, workers: int, commands: Any, results: Any) -> None:
    def emit(record: dict[str, Any]) -> None:
        results.put(("record", record))

    while (command := commands.get()) is not None:
        level, start_at = command
        try:
            stats = event_loop.run(run_level(settings, level, worker, workers, emit, start_at))
            results.put(("level", worker, stats.encode()))
        except Exception as error:
            results.put(("failed", worker, repr(error)))
            raise


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set a handler; off it, SIGINT is not this code's to route
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _run_in_processes(settings: ProbeSettings, schedule: Schedule, workers: int, sink: LevelSink) -> None:
    context = multiprocessing.get_context("spawn")
    results: Any = context.Queue()
    commands = [context.Queue() for _ in range(workers)]
    processes = [
        context.Process(target=_worker_main, args=(settings, w, workers, commands[w], results), daemon=True)
        for w in range(workers)
    ]
    # Ctrl-C is the parent's to handle: a terminal sends SIGINT to the whole process group, and a worker
    # interrupted mid-level would print its traceback. Started with SIGINT ignored, the workers keep it
    # ignored (an ignored signal survives exec, and Python installs its handler only over the default one);
    # the parent stops them itself.
    with _sigint_ignored():
        for process in processes:
            process.start()

    def run_one(level: Level) -> LevelStats:
        start_at = time.perf_counter() + START_DELAY_S
        for command in commands:
            command.put((level, start_at))
        merged = LevelStats()
        reported: set[int] = set()
        while len(reported) < workers:
            try:
                message = results.get(timeout=0.5)
            except queue.Empty:
                dead = [w for w, p in enumerate(processes) if not p.is_alive() and w not in reported]
                if dead:
                    raise RuntimeError(f"worker process(es) {dead} died during level {level.index}") from None
                continue
            if message[0] == "record":
                sink.record(message[1])
            elif message[0] == "level":
                merged.merge(message[2])
                reported.add(message[1])
            else:
                raise RuntimeError(f"worker {message[1]} failed: {message[2]}")
        return merged

    interrupted = False
    try:
        drive(schedule, run_one, sink)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        for command in commands:
            command.put(None)
        for process in processes:
            if interrupted:  # mid-level, a worker would run it to its end: stop it now
                process.terminate()
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
