"""Measurement: what bounding each wait for a stream's next chunk costs, `asyncio.timeout()` around each wait
against `client/idle.py`'s `IdleTimeout` (one timer per timeout), with no bound as the floor. CPU of this
process per wait, over a generator whose every item is a wait, medians of `--runs`, alternating. A
measurement, not a test.

    .venv/bin/python bench/idle_timeout.py [--waits 200000] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

from sonic_deploy.client.idle import IdleTimeout

BOUND_S = 10.0


async def chunks(count: int) -> AsyncIterator[int]:
    for index in range(count):
        yield index


async def with_asyncio_timeout(count: int) -> None:
    items = chunks(count)
    while True:
        async with asyncio.timeout(BOUND_S):
            item = await anext(items, None)
        if item is None:
            return


async def with_idle_timeout(count: int) -> None:
    items, idle = chunks(count), IdleTimeout(BOUND_S)
    while True:
        with idle:
            item = await anext(items, None)
        if item is None:
            idle.close()
            return


async def unbounded(count: int) -> None:
    items = chunks(count)
    while await anext(items, None) is not None:
        pass


def cpu_us_per_wait(way: Callable[[int], Coroutine[Any, Any, None]], count: int) -> float:
    began = time.process_time()
    asyncio.run(way(count))
    return (time.process_time() - began) / count * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--waits", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    ways = {"asyncio.timeout": with_asyncio_timeout, "IdleTimeout": with_idle_timeout, "no bound": unbounded}
    figures: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.runs):
        for name, way in ways.items():
            figures[name].append(cpu_us_per_wait(way, args.waits))
    medians = {name: statistics.median(values) for name, values in figures.items()}
    print(f"CPU per wait, median of {args.runs} runs of {args.waits} waits")
    for name, median in medians.items():
        print(f"{name:>16}: {median:5.2f} us")
    ratio = medians["IdleTimeout"] / medians["asyncio.timeout"]
    print(f"IdleTimeout / asyncio.timeout: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
