"""How the probe's code runs: which asyncio event loop, and when Python's cycle collector may pause it.

The loop is uvloop where installed (less CPU per message, so fewer of the client's own delays under load),
else the standard one. Timestamps never come from the loop's clock (uvloop's is coarse): they are
`time.perf_counter()` readings. The reference server runs the standard loop on a `PreciseEpollSelector`
(`precise_loop`), whose timers fire when they are due rather than up to a millisecond after.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import os
import select
import selectors
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")
# `SONIC_PROBE_LOOP=asyncio` forces the standard loop (to compare, or to rule uvloop out).
CHOICE_VARIABLE = "SONIC_PROBE_LOOP"
# Net new container objects between two young collections while measuring (Python's default is 700).
STEADY_YOUNG_THRESHOLD = 200_000


def loop_name() -> str:
    wanted = os.environ.get(CHOICE_VARIABLE, "auto")
    if wanted == "asyncio":
        return "asyncio"
    if importlib.util.find_spec("uvloop") is not None:
        return "uvloop"
    if wanted == "uvloop":
        raise RuntimeError("SONIC_PROBE_LOOP=uvloop but uvloop is not installed: pip install uvloop")
    return "asyncio"


def _factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    if loop_name() == "uvloop":
        import uvloop

        new_loop: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
        return new_loop
    return None


@dataclass
class CollectorPauses:
    """The cycle collector's runs while measuring: a pause is visible in the output, not hidden in it."""

    collections: int = 0
    total_ms: float = 0.0
    max_ms: float = 0.0
    _began: float = field(default=0.0, repr=False)

    def observe(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            return
        pause = (time.perf_counter() - self._began) * 1000
        self.collections += 1
        self.total_ms += pause
        self.max_ms = max(self.max_ms, pause)


@contextmanager
def steady_collector(young_threshold: int = STEADY_YOUNG_THRESHOLD) -> Iterator[CollectorPauses]:
    """Keep the cycle collector from pausing a measurement, without turning it off.

    With Python's defaults, a young collection runs every 700 net new container objects, and now and then a
    full one walks every object the process holds (botocore's service models, the HDR histograms...): on
    the 2-core development VM that paused the probe for up to 40 ms in the middle of a level, and every
    first chunk that arrived meanwhile was stamped that much late. Here: what exists on entry is frozen out
    of later collections, and a young collection waits for `young_threshold` net new container objects
    (live ones, or cyclic garbage not yet collected), which a level's streams do not reach unless its heap
    keeps growing. When one runs anyway, it is counted in the pauses yielded. Everything is restored on
    the way out, even on an error; objects frozen by someone else before entry stay frozen.
    """
    thresholds = gc.get_threshold()
    was_frozen = gc.get_freeze_count() > 0
    gc.collect()
    gc.freeze()
    gc.set_threshold(young_threshold, *thresholds[1:])
    pauses = CollectorPauses()
    gc.callbacks.append(pauses.observe)
    try:
        yield pauses
    finally:
        gc.callbacks.remove(pauses.observe)
        gc.set_threshold(*thresholds)
        if not was_frozen:
            gc.unfreeze()


class PreciseEpollSelector(selectors.EpollSelector):
    """epoll, waited on with a timeout precise to the microsecond.

    `epoll_wait` takes whole milliseconds and Python rounds a timeout up, so with the standard selector an
    `asyncio.sleep` ends up to a millisecond late, on top of what the kernel adds (on the development VM the
    median overshoot of a 89-90 ms sleep is 0.85 ms, and 0.36 ms with this selector: bench/timer_precision.py).
    Here the wait is a `select()` on the epoll descriptor itself (microseconds), followed by a poll that
    does not block. Without a timeout, or with none left, it is plain epoll; so is an epoll descriptor of
    1024 or more, which `select()` cannot take (the loop makes it before any socket, so it is low).
    """

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        descriptor = self.fileno()
        if timeout is not None and timeout > 0 and descriptor < 1024:  # select()'s FD_SETSIZE
            select.select([descriptor], [], [], timeout)
            timeout = 0
        return super().select(timeout)


def precise_loop() -> asyncio.AbstractEventLoop:
    """The standard event loop on `PreciseEpollSelector` where epoll exists (Linux), else the default."""
    if not hasattr(select, "epoll"):
        return asyncio.new_event_loop()
    return asyncio.SelectorEventLoop(PreciseEpollSelector())


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run one level's coroutine on its own loop."""
    with asyncio.Runner(loop_factory=_factory()) as runner:
        return runner.run(coroutine)


# The last part of a stand-in's one-off delay (a final transcript, a first token, a first audio byte) is
# waited for by reading the clock rather than on a timer: a timer wakes the loop a few hundred microseconds
# late, and the turn's five hops would add those up. Bounded CPU: at most this long per delay.
SPIN_S = 0.0006


def _spin(loop: asyncio.AbstractEventLoop, when: float) -> None:
    """Read the loop's clock until `when`, for SPIN_S of real time at most (a loop whose clock does not move
    while it spins, a cached or a test's clock, must not hang it)."""
    give_up = time.perf_counter() + SPIN_S
    while loop.time() < when and time.perf_counter() < give_up:
        pass


async def sleep_until(when: float) -> None:
    """Until `when` on the running loop's clock, and not later than the loop can be back."""
    loop = asyncio.get_running_loop()
    ahead = when - SPIN_S - loop.time()
    if ahead > 0:
        await asyncio.sleep(ahead)
    _spin(loop, when)


def call_precisely_at(
    loop: asyncio.AbstractEventLoop, when: float, callback: Callable[[], None]
) -> asyncio.TimerHandle:
    """`loop.call_at(when, callback)`, the last SPIN_S of the wait read off the clock (see `sleep_until`)."""

    def spin_then_call() -> None:
        _spin(loop, when)
        callback()

    return loop.call_at(when - SPIN_S, spin_then_call)
