"""`--slo`: a service-level objective a closed-loop level meets or not, e.g. `ttfa_p95<=300ms,errors<=0.1%`.

Terms are comma-separated, each `MEASURE_PCT<=VALUE[ms|s]` on a latency of the level summary (`ttfa`,
`ttfa_audible`, `service_ttfa`, `ttfa_last_piece` (an agent's turns), `total`, `max_gap`; `p50`, `p90`, `p95`, `p99` or `max`; a bare number is ms)
or `errors<=X%` on the share of failed requests (`errors<=0` too). A level meets the objective when every
term holds and at least one request succeeded: a level with no successful request has no latency to judge.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Short name in a term -> the level summary's key.
MEASURES = {
    "ttfa": "ttfa_ms",
    "ttfa_audible": "ttfa_audible_ms",
    "service_ttfa": "service_ttfa_ms",
    "ttfa_last_piece": "ttfa_last_piece_ms",
    "total": "total_ms",
    "max_gap": "max_gap_ms",
}
PERCENTILES = ("p50", "p90", "p95", "p99", "max")
ERRORS = "errors"
# The reason a level with no successful request fails, in the place of a term.
NO_SUCCESS = "no successful request"
LATENCY_EXAMPLE = "ttfa_p95<=300ms"
ERRORS_EXAMPLE = "errors<=0.1%"
EXAMPLE = f"{LATENCY_EXAMPLE},{ERRORS_EXAMPLE}"
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_DURATION = re.compile(rf"({_NUMBER})(ms|s)?")
_SHARE = re.compile(rf"({_NUMBER})(%)?")
# Float noise in a share computed from counts (1 of 1000 against 0.1 %) must not fail a level.
_TOLERANCE = 1e-9


class SloError(ValueError):
    """A spec that does not parse: the message names the term, what is wrong, and a correct example."""


@dataclass(frozen=True)
class Term:
    """One bound: `measure` is a level summary key (`ttfa_ms`, ...) with a `percentile`, or `errors` with
    none; `limit` is in ms for a latency, a share (0..1) for errors."""

    text: str
    measure: str
    percentile: str | None
    limit: float

    @property
    def unit(self) -> str:
        return "share" if self.measure == ERRORS else "ms"

    def measured(self, level: Mapping[str, Any]) -> float | None:
        """The level's value for this term, in the limit's unit (None: no latency, nothing succeeded)."""
        if self.measure == ERRORS:
            requests = int(level["requests"])
            return 1.0 if requests == 0 else (requests - int(level["ok"])) / requests
        value = level[self.measure][self.percentile]
        return None if value is None else float(value)

    def as_json(self) -> dict[str, Any]:
        return {
            "term": self.text,
            "measure": self.measure,
            "percentile": self.percentile,
            "limit": self.limit,
            "unit": self.unit,
        }


@dataclass(frozen=True)
class Slo:
    spec: str
    terms: tuple[Term, ...]

    def failures(self, level: Mapping[str, Any]) -> list[dict[str, Any]]:
        """What the level broke, each as {"term", "measured"} (in the term's unit); empty if it met them all."""
        failed: list[dict[str, Any]] = []
        if int(level["ok"]) == 0:
            failed.append({"term": NO_SUCCESS, "measured": int(level["requests"])})
        for term in self.terms:
            value = term.measured(level)
            if value is None or value > term.limit * (1 + _TOLERANCE) + _TOLERANCE:
                failed.append({"term": term.text, "measured": value})
        return failed

    def as_json(self) -> dict[str, Any]:
        return {"spec": self.spec, "terms": [term.as_json() for term in self.terms]}


def parse_slo(spec: str) -> Slo:
    terms: list[Term] = []
    for raw in spec.split(","):
        term = _parse_term(raw.strip())
        if any(t.measure == term.measure and t.percentile == term.percentile for t in terms):
            bounded = term.text.partition("<=")[0]
            example = ERRORS_EXAMPLE if term.measure == ERRORS else LATENCY_EXAMPLE
            raise _bad(raw.strip(), f"{bounded} is bounded twice: keep one", example)
        terms.append(term)
    return Slo(spec, tuple(terms))


def _bad(term: str, problem: str, example: str) -> SloError:
    return SloError(f"bad term {term!r}: {problem}; e.g. {example} (a whole spec: {EXAMPLE})")


def _parse_term(term: str) -> Term:
    if not term:
        raise _bad(term, "empty (two commas in a row, or one at an end?)", LATENCY_EXAMPLE)
    name, sep, value = term.partition("<=")
    name, value = name.strip(), value.strip()
    example = ERRORS_EXAMPLE if name.startswith(ERRORS) else LATENCY_EXAMPLE
    if not sep:
        problem = "only '<=' is allowed" if re.search(r"[<>=]", term) else "no '<=' (an upper bound)"
        raise _bad(term, problem, example)
    if name == ERRORS:
        return _errors_term(term, value)
    measure, _, percentile = name.rpartition("_")
    if percentile not in PERCENTILES or not measure:
        raise _bad(term, f"{name!r} ends in no percentile ({', '.join(PERCENTILES)})", LATENCY_EXAMPLE)
    short = measure.removesuffix("_ms")
    if short not in MEASURES:
        known = ", ".join([*MEASURES, ERRORS])
        raise _bad(term, f"unknown measure {measure!r} (known: {known})", LATENCY_EXAMPLE)
    match = _DURATION.fullmatch(value)
    limit_ms = -1.0 if match is None else float(match[1]) * (1000.0 if match[2] == "s" else 1.0)
    if not (math.isfinite(limit_ms) and limit_ms > 0):
        raise _bad(term, f"{value!r} is not a positive duration (ms or s)", example)
    return Term(f"{short}_{percentile}<={limit_ms:g}ms", MEASURES[short], percentile, limit_ms)


def _errors_term(term: str, value: str) -> Term:
    match = _SHARE.fullmatch(value)
    percent = float(match[1]) if match is not None else math.nan
    if match is not None and match[2] is None and percent != 0:
        raise _bad(term, f"{value!r} has no '%' (only 0 may go without)", ERRORS_EXAMPLE)
    if not (0 <= percent <= 100):
        raise _bad(term, f"{value!r} is not a share from 0% to 100%", ERRORS_EXAMPLE)
    return Term(f"{ERRORS}<={percent:g}%", ERRORS, None, percent / 100)
