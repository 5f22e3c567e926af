"""How the probe's code runs: which asyncio event loop, and when Python's cycle collector may pause it.

The loop is uvloop where installed (less CPU per message, so fewer of the client's own delays under load),
else the standard one. Timestamps never come from the loop's clock (uvloop's is coarse): they are
`time.perf_counter()` readings. The reference server always runs the standard loop.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import os
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
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


@contextmanager
def steady_collector(young_threshold: int = STEADY_YOUNG_THRESHOLD) -> Iterator[None]:
    """Keep the cycle collector from pausing a measurement, without turning it off.

    With Python's defaults, a young collection runs every 700 net new container objects, and now and then a
    full one walks every object the process holds (botocore's service models, the HDR histograms...): on
    the 2-core development VM that paused the probe for up to 40 ms in the middle of a level, and every
    first chunk that arrived meanwhile was stamped that much late. Streams leave almost no cyclic garbage
    (reference counting frees them), so here: what exists now is frozen out of later collections, and a
    young collection waits for `young_threshold` net new objects, which a growing heap still reaches.
    Everything is restored, and collected, on the way out.
    """
    thresholds = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(young_threshold, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
        gc.collect()


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run one level's coroutine on its own loop, with the collector kept steady."""
    with steady_collector(), asyncio.Runner(loop_factory=_factory()) as runner:
        return runner.run(coroutine)
