"""Benchmark: how late `asyncio.sleep` ends, on the standard selector and on the reference server's.

The reference server's first-byte delay is an `asyncio.sleep` until a deadline 90 ms after the request
arrived, so what is left to sleep is 90 ms less the time the request took to handle: rarely a whole
number of milliseconds. Whatever the sleep overshoots is counted in the probe's error by
bench/probe_ttfa.py. This times such sleeps (90 ms less 0-1 ms, at random) on an otherwise idle loop,
both selectors in turn in this process, and prints the overshoot in ms. It is a measurement, not a test.

    .venv/bin/python bench/timer_precision.py [--sleeps 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections.abc import Callable

from sonic_deploy.event_loop import precise_loop

DELAY_S = 0.090


async def overshoot_ms(sleeps: int, seed: int) -> list[float]:
    draw = random.Random(seed)
    late = []
    for _ in range(sleeps):
        left = DELAY_S - draw.uniform(0, 0.001)  # the deadline less the time already spent
        began = time.perf_counter()
        await asyncio.sleep(left)
        late.append((time.perf_counter() - began - left) * 1000)
    return sorted(late)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sleeps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="each selector this many times, alternating")
    args = parser.parse_args()
    loops: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
        "standard (epoll, ms steps)": asyncio.new_event_loop,
        "precise (reference server)": precise_loop,
    }
    print(f"# asyncio.sleep({DELAY_S * 1000:g} ms less 0-1 ms) overshoot in ms, {args.sleeps} sleeps per row")
    print(f"{'selector':<28} {'p50':>6} {'p90':>6} {'p99':>6} {'max':>6}")
    medians: dict[str, list[float]] = {name: [] for name in loops}
    for round_ in range(args.rounds):
        for name, factory in loops.items():
            with asyncio.Runner(loop_factory=factory) as runner:
                late = runner.run(overshoot_ms(args.sleeps, round_))
            p50, p90, p99 = (late[min(len(late) - 1, int(f * len(late)))] for f in (0.5, 0.9, 0.99))
            medians[name].append(p50)
            print(f"{name:<28} {p50:>6.3f} {p90:>6.3f} {p99:>6.3f} {late[-1]:>6.3f}", flush=True)
    standard, precise = (sorted(m)[len(m) // 2] for m in medians.values())
    print(
        f"# median overshoot: standard {standard:.3f} ms, precise {precise:.3f} ms ({standard / precise:.1f}x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
