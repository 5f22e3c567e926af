"""`--slo`: the highest closed-loop concurrency that meets an objective, found rather than swept.

From `start`, the concurrency doubles until a level fails or `maximum` is reached; the search then bisects
between the last level that passed and the first that failed until they are within the resolution (by
default 5 % of the passing level, at least 1 stream). It assumes that more load never makes the objective
easier: the answer is a level that passed, with the next level tried above it failing (or none above it).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sonic_deploy.probe.slo import Slo

if TYPE_CHECKING:
    from sonic_deploy.probe.level import Level
    from sonic_deploy.probe.stats import LevelStats

DEFAULT_START = 1
DEFAULT_MAXIMUM = 1024
DEFAULT_RESOLUTION_SHARE = 0.05


@dataclass(frozen=True)
class SearchRange:
    start: int = DEFAULT_START
    maximum: int = DEFAULT_MAXIMUM
    # Bisection stops once the failing level is at most this many streams above the passing one;
    # None: 5 % of the passing level, at least 1.
    resolution: int | None = None

    def close_enough(self, passed: int, failed: int) -> bool:
        step = self.resolution if self.resolution is not None else max(1.0, passed * DEFAULT_RESOLUTION_SHARE)
        return failed - passed <= step

    def as_json(self) -> dict[str, Any]:
        return {"start": self.start, "max": self.maximum, "resolution": self.resolution}


@dataclass(frozen=True)
class SearchResult:
    max_concurrency: int | None  # the highest level that passed; None: even `start` failed
    bounded_by_max: bool  # `maximum` itself passed: the capacity may be higher


def search(bounds: SearchRange) -> Generator[int, bool, SearchResult]:
    """Yields the concurrency to try next; is sent whether it passed; returns the answer."""
    if not (yield bounds.start):
        return SearchResult(None, False)
    passed = bounds.start
    while True:
        if passed >= bounds.maximum:
            return SearchResult(passed, True)
        tried = min(2 * passed, bounds.maximum)
        if not (yield tried):
            failed = tried
            break
        passed = tried
    while not bounds.close_enough(passed, failed):
        middle = (passed + failed) // 2
        if (yield middle):
            passed = middle
        else:
            failed = middle
    return SearchResult(passed, False)


class SloSearch:
    """The search as levels for `workers.run_schedule`: each level's statistics are judged against the SLO,
    and the verdict chooses the next level. `as_json` is the summary's `slo` object, at any point of it."""

    def __init__(self, slo: Slo, bounds: SearchRange, make_level: Callable[[int, int], Level]) -> None:
        """`make_level(index, concurrency)`: an ordinary closed-loop level (requests, warm-up)."""
        self.slo, self.bounds, self.make_level = slo, bounds, make_level
        self.tried: list[dict[str, Any]] = []
        self.result: SearchResult | None = None  # None until the search has ended

    def levels(self) -> Generator[Level, LevelStats, None]:
        steps = search(self.bounds)
        concurrency = next(steps)
        for index in itertools.count():
            stats = yield self.make_level(index, concurrency)
            failed = self.slo.failures(stats.summary(concurrency, None))
            self.tried.append({"concurrency": concurrency, "passed": not failed, "failed": failed})
            try:
                concurrency = steps.send(not failed)
            except StopIteration as done:
                self.result = done.value
                return

    def as_json(self) -> dict[str, Any]:
        result = self.result
        return {
            **self.slo.as_json(),
            **self.bounds.as_json(),
            "tried": self.tried,
            "finished": result is not None,
            "max_concurrency": None if result is None else result.max_concurrency,
            "bounded_by_max": result is not None and result.bounded_by_max,
        }

    def verdict(self) -> str:
        return verdict(self.as_json())


def verdict(slo: dict[str, Any]) -> str:
    """One line for the operator from a summary's `slo` object: the answer, or why there is none."""
    spec, tried, answer = slo["spec"], slo["tried"], slo["max_concurrency"]
    if not slo["finished"]:
        best = max((t["concurrency"] for t in tried if t["passed"]), default=None)
        so_far = "none passed" if best is None else f"the highest passing so far: c={best}"
        return f"SLO {spec}: the search did not end, so no answer ({so_far})"
    if answer is None:
        first = tried[0]
        broken = ", ".join(f["term"] for f in first["failed"])
        return f"SLO {spec}: no concurrency meets it: even c={first['concurrency']} (--slo-start) fails ({broken})"
    line = f"SLO {spec}: highest concurrency meeting it: {answer}"
    if slo["bounded_by_max"]:
        return f"{line}, the top of the search (--slo-max): the capacity may be higher"
    above = min(t["concurrency"] for t in tried if t["concurrency"] > answer)
    return f"{line} (c={above} fails)"
