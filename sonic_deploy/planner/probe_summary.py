"""Streams one instance serves, measured: the highest concurrency a probe run held under a TTFA budget.

Reads only the probe's `summary.json` (`levels[].concurrency`, `.requests`, `.ok`, `.ttfa_ms.p95`). Levels are
taken in rising concurrency; the answer is the last level before the first one that breaks the budget or fails
more than `MAX_ERROR_SHARE` of its requests, so that a lucky high level after a failing one does not count.
Rate-driven levels (concurrency null) say nothing about concurrency and are skipped. The probe must have
driven a single instance for the figure to be per instance.

A run that searched for its capacity (`probe --slo`) carries its answer (`slo.max_concurrency`): that is the
figure, and the budget is not applied (the search already judged every level by its own objective, which may
bound more than the p95, and only it knows which levels it tried). A search that found no concurrency meeting
its objective gives no figure; one that did not end (interrupted) is read as a sweep, by the budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sonic_deploy.config import ConfigError
from sonic_deploy.probe.summary_file import check_summary, read_summary_file

MAX_ERROR_SHARE = 0.01


@dataclass(frozen=True)
class MeasuredConcurrency:
    streams: int
    ttfa_p95_ms: float
    budget_ms: float
    path: Path
    # The spec of the probe's SLO search when the figure is its answer (the budget then not applied), and
    # whether the top of its search still passed (the capacity may be higher).
    slo: str | None = None
    bounded_by_max: bool = False

    def describe(self) -> str:
        if self.slo is None:
            return f"probe: {self.path.name}, TTFA p95 {self.ttfa_p95_ms:g} ms <= {self.budget_ms:g} ms"
        top = " (the top of its search: may be higher)" if self.bounded_by_max else ""
        return (
            f"probe: {self.path.name}, SLO search {self.slo}: highest concurrency meeting it{top}, "
            f"TTFA p95 {self.ttfa_p95_ms:g} ms; --ttfa-budget-ms not applied"
        )


@dataclass(frozen=True)
class _Level:
    concurrency: int
    requests: int
    ok: int
    ttfa_p95_ms: float


def measured_streams(path: Path, budget_ms: float) -> MeasuredConcurrency:
    """`budget_ms` as --ttfa-budget-ms's type checked it (finite, above 0)."""
    data = read_summary_file(path)
    levels = sorted(_read_levels(data, path), key=lambda level: level.concurrency)
    searched = _slo_answer(data, path, levels, budget_ms)
    if searched is not None:
        return searched
    if not levels:
        raise ConfigError(
            file=path,
            field="levels",
            value=[],
            problem="no level with a concurrency",
            fix="run the probe in concurrency mode (levels with `concurrency` set)",
        )
    best: _Level | None = None
    for level in levels:
        failed = level.requests == 0 or (level.requests - level.ok) / level.requests > MAX_ERROR_SHARE
        if failed or level.ttfa_p95_ms > budget_ms:
            break
        best = level
    if best is None:
        first = levels[0]
        raise ConfigError(
            file=path,
            field=f"levels[concurrency={first.concurrency}].ttfa_ms.p95",
            value=first.ttfa_p95_ms,
            problem=f"even the lowest level breaks the {budget_ms:g} ms budget or fails more than "
            f"{MAX_ERROR_SHARE:.0%} of requests ({first.ok} of {first.requests} ok)",
            fix="raise --ttfa-budget-ms, or probe lower concurrency levels",
        )
    return MeasuredConcurrency(best.concurrency, best.ttfa_p95_ms, budget_ms, path)


def _slo_answer(
    data: dict[str, Any], path: Path, levels: list[_Level], budget_ms: float
) -> MeasuredConcurrency | None:
    """The figure of a finished SLO search; None without one (the levels are then judged by the budget)."""
    slo = data.get("slo")
    if slo is None:
        return None
    if not (
        isinstance(slo, dict) and isinstance(slo.get("spec"), str) and isinstance(slo.get("finished"), bool)
    ):
        raise ConfigError(
            file=path,
            field="slo",
            value=slo,
            problem="not the probe's SLO search (spec, finished, max_concurrency)",
            fix="pass a summary.json written by `sonic-deploy probe ... --slo SPEC`, unedited",
        )
    if not slo["finished"]:
        return None
    spec, answer = slo["spec"], slo.get("max_concurrency")
    if answer is None:
        raise ConfigError(
            file=path,
            field="slo.max_concurrency",
            value=None,
            problem=f"the probe's SLO search found no concurrency meeting {spec} (even its first level failed)",
            fix="probe again from a lower --slo-start or with the objective you can meet, or plan from a sweep "
            "without --slo (judged by --ttfa-budget-ms)",
        )
    found = next((level for level in levels if level.concurrency == answer), None)
    if isinstance(answer, bool) or found is None:
        raise ConfigError(
            file=path,
            field="slo.max_concurrency",
            value=answer,
            problem="not the concurrency of one of the summary's levels",
            fix="pass a summary.json written by `sonic-deploy probe ... --slo SPEC`, unedited",
        )
    return MeasuredConcurrency(
        found.concurrency, found.ttfa_p95_ms, budget_ms, path, spec, slo.get("bounded_by_max") is True
    )


def _read_levels(data: dict[str, Any], path: Path) -> list[_Level]:
    """The concurrency levels, each checked as the probe writes it (probe/summary_file.py): a hostile or
    corrupt one is refused, never taken as a measured capacity."""
    levels = []
    for raw in check_summary(path, data, whole_run=False):
        if raw["concurrency"] is None:
            continue
        p95 = raw["ttfa_ms"]["p95"]
        # A level where every request failed has no latency: it cannot pass.
        levels.append(
            _Level(raw["concurrency"], raw["requests"], raw["ok"], math.inf if p95 is None else float(p95))
        )
    return levels
