"""Which asyncio event loop runs the probe: uvloop where installed (less CPU per message, so fewer of the
client's own delays under load), else the standard one. Timestamps never come from the loop's clock (uvloop's
is coarse): they are `time.perf_counter()` readings. The reference server always runs the standard loop."""

from __future__ import annotations

import asyncio
import importlib.util
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
# `SONIC_PROBE_LOOP=asyncio` forces the standard loop (to compare, or to rule uvloop out).
CHOICE_VARIABLE = "SONIC_PROBE_LOOP"


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


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    with asyncio.Runner(loop_factory=_factory()) as runner:
        return runner.run(coroutine)
