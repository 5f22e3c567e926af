"""The latency budget a turn run is judged against (config/turn_budget.toml), and the verdict.

The verdict names what breaks the budget: each hop over its own target or limit, and, when the whole turn
is over, the hops to blame (those over their own budget, or else the one with the largest share).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sonic_deploy.turn.call import HOPS
from sonic_deploy.user_files import RefusedFileError, read_regular

DEFAULT_BUDGET = Path("config/turn_budget.toml")
PERCENTILES = ("p50", "p90", "p95", "p99", "max")


class BudgetError(ValueError):
    """A budget file that cannot be used; the message names the file, the field, the value and the fix."""


@dataclass(frozen=True)
class Line:
    target_ms: float
    limit_ms: float
    source: str


@dataclass(frozen=True)
class Budget:
    path: str
    target_at: str
    limit_at: str
    telephony_ms: float
    turn: Line | None
    hops: dict[str, Line]


# An hour: a budget past it (or nan, inf, 1e300) judges nothing a turn can take.
LONGEST_MS = 3_600_000


def _number(path: Path, field: str, value: object) -> float:
    # A range, not `value < 0`: nan compares false both ways and passed that.
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= LONGEST_MS:
        raise BudgetError(
            f"{path}: {field} = {value!r} is not a number of ms from 0 to {LONGEST_MS}. Fix: e.g. {field} = 350"
        )
    return float(value)


def _line(path: Path, name: str, table: object) -> Line:
    if not isinstance(table, dict):
        raise BudgetError(f"{path}: [{name}] is not a table. Fix: [{name}] with target_ms, limit_ms, source")
    unknown = set(table) - {"target_ms", "limit_ms", "source"}
    if unknown:
        raise BudgetError(
            f"{path}: [{name}] has {', '.join(sorted(unknown))}. Fix: only target_ms, limit_ms, source"
        )
    for key in ("target_ms", "limit_ms", "source"):
        if key not in table:
            raise BudgetError(
                f"{path}: [{name}] has no {key}. Fix: add {key} (every default names its source)"
            )
    target = _number(path, f"[{name}] target_ms", table["target_ms"])
    limit = _number(path, f"[{name}] limit_ms", table["limit_ms"])
    if limit < target:
        raise BudgetError(
            f"{path}: [{name}] limit_ms {limit:g} is below target_ms {target:g}. Fix: limit_ms >= target_ms"
        )
    if not isinstance(table["source"], str) or not table["source"].strip():
        raise BudgetError(f"{path}: [{name}] source is empty. Fix: where the figures come from")
    return Line(target, limit, table["source"])


def load_budget(path: Path) -> Budget:
    try:
        data = tomllib.loads(read_regular(path, limit=2**20).decode("utf-8"))
    except RefusedFileError as error:
        raise BudgetError(f"{path}: cannot read it ({error.problem}). Fix: --budget FILE") from None
    except UnicodeDecodeError:
        raise BudgetError(f"{path}: not UTF-8 text. Fix: --budget a TOML file") from None
    except tomllib.TOMLDecodeError as error:
        raise BudgetError(
            f"{path}: not TOML ({error}). Fix: --budget a TOML file, as config/turn_budget.toml"
        ) from None
    unknown = set(data) - {"judge", "telephony_ms", "turn", "hops"}
    if unknown:
        raise BudgetError(
            f"{path}: unknown {', '.join(sorted(unknown))}. Fix: judge, telephony_ms, turn, hops"
        )
    judge = data.get("judge", {})
    if not isinstance(judge, dict):
        raise BudgetError(
            f'{path}: judge = {judge!r} is not a table. Fix: [judge] with target = "p50", limit = "p95"'
        )
    if unknown := set(judge) - {"target", "limit"}:
        raise BudgetError(f"{path}: [judge] has {', '.join(sorted(unknown))}. Fix: only target and limit")
    at = {key: judge.get(key, default) for key, default in (("target", "p50"), ("limit", "p95"))}
    for key, value in at.items():
        if value not in PERCENTILES:
            raise BudgetError(f"{path}: [judge] {key} = {value!r}. Fix: one of {', '.join(PERCENTILES)}")
    hops = data.get("hops", {})
    if not isinstance(hops, dict):
        raise BudgetError(f"{path}: hops is not a table. Fix: [hops.stt], [hops.llm]...")
    for name in hops:
        if name not in HOPS:
            raise BudgetError(f"{path}: [hops.{name}] is not a hop. Fix: one of {', '.join(HOPS)}")
    return Budget(
        path=str(path),
        target_at=at["target"],
        limit_at=at["limit"],
        telephony_ms=_number(path, "telephony_ms", data.get("telephony_ms", 0)),
        turn=_line(path, "turn", data["turn"]) if "turn" in data else None,
        hops={name: _line(path, f"hops.{name}", table) for name, table in hops.items()},
    )


def _check(
    name: str, line: Line, measured: dict[str, float | None], budget: Budget, extra_ms: float = 0.0
) -> dict[str, Any]:
    verdict: dict[str, Any] = {"source": line.source}
    over = []
    for label, at, allowed in (
        ("target", budget.target_at, line.target_ms),
        ("limit", budget.limit_at, line.limit_ms),
    ):
        value = measured.get(at)
        if value is None:
            verdict[label] = {"at": at, "budget_ms": allowed, "measured_ms": None}
            continue
        total = value + extra_ms
        verdict[label] = {"at": at, "budget_ms": allowed, "measured_ms": round(total, 3)}
        if total > allowed:
            over.append(f"{name} {at} {total:.0f} ms > {label} {allowed:.0f} ms")
    verdict["over"] = over
    return verdict


def judge(
    budget: Budget, hops: dict[str, dict[str, float | None]], turn: dict[str, float | None]
) -> dict[str, Any]:
    """Each judged hop and the turn against the budget, and a one-line verdict naming what breaks it."""
    result: dict[str, Any] = {"file": budget.path, "telephony_ms": budget.telephony_ms, "hops": {}}
    broken: list[str] = []
    for name, line in budget.hops.items():
        checked = _check(name, line, hops.get(name, {}), budget)
        result["hops"][name] = checked
        broken += checked["over"]
    if budget.turn is not None:
        checked = _check("turn", budget.turn, turn, budget, budget.telephony_ms)
        result["turn"] = checked
        if checked["over"]:
            over = {item.split()[0] for item in broken}
            blamed = [name for name in HOPS if name in over]  # in the order they happen
            if not blamed:  # no hop is over its own budget: the biggest share at the percentile that broke
                at = budget.limit_at if any("limit" in item for item in checked["over"]) else budget.target_at
                shares = {name: (hops.get(name, {}).get(at) or 0.0) for name in HOPS}
                blamed = [max(shares, key=lambda name: shares[name])]
                checked["largest_share"] = {"hop": blamed[0], "at": at, "ms": round(shares[blamed[0]], 3)}
            checked["blame"] = blamed
        broken = checked["over"] + broken
    result["within"] = not broken
    result["verdict"] = "within budget" if not broken else "over budget: " + "; ".join(broken)
    if budget.turn is not None and result["turn"].get("blame"):
        result["verdict"] += f" (the turn breaks it through {', '.join(result['turn']['blame'])})"
    return result
