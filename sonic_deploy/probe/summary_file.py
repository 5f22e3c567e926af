"""A probe run's summary.json read back (by `probe compare` and `plan --probe`), refused unless every level
is one the probe can have written: a truncated, binary, edited or hostile file (NaN, negative counts, more
ok than requests, an absurd concurrency) is a `ConfigError` naming the file, the field and the fix, never
taken as a measured capacity. Light: no probe extra needed, so the planner reads it too."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from sonic_deploy.arguments import MAX_CONCURRENCY, MAX_RATE, MAX_TEXT_BYTES
from sonic_deploy.config import ConfigError
from sonic_deploy.config.errors import MISSING

SUMMARY, SAMPLES = "summary.json", "samples.jsonl"  # the names probe/output.py writes
# Far above any run (a week at the highest rate): a count beyond it is not the probe's.
MAX_COUNT = 10**13
REWRITE = "probe again (`sonic-deploy probe ...` writes OUT/summary.json), or pass an unedited summary.json"


def _refuse(path: Path, field: str, value: object, problem: str, fix: str = REWRITE) -> ConfigError:
    return ConfigError(file=path, field=field, value=value, problem=problem, fix=fix)


def _no_constant(text: str) -> float:
    raise ValueError(f"{text} is not a JSON number")


def read_summary_file(path: Path) -> dict[str, Any]:
    """The JSON object in `path`, or a ConfigError: unreadable, too large, not UTF-8, not strict JSON
    (Python's NaN and Infinity refused), too deeply nested, not an object."""
    fix = "pass the summary.json a probe run wrote (OUT/summary.json)"
    try:
        with path.open("rb") as opened:
            raw = opened.read(MAX_TEXT_BYTES + 1)
    except OSError as error:
        raise _refuse(path, "(file)", str(path), f"cannot read: {error.strerror or error}", fix) from None
    if len(raw) > MAX_TEXT_BYTES:
        raise _refuse(path, "(file)", str(path), f"larger than {MAX_TEXT_BYTES // 2**20} MiB", fix)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _refuse(path, "(file)", str(path), "not UTF-8 text (a binary file?)", fix) from None
    try:
        data: Any = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        where = f"line {error.lineno} column {error.colno}"
        raise _refuse(path, "(syntax)", str(path), f"not JSON: {error.msg} at {where}", fix) from None
    except ValueError as error:
        raise _refuse(path, "(syntax)", str(path), f"not JSON: {error}", fix) from None
    except RecursionError:
        raise _refuse(path, "(syntax)", str(path), "nested too deeply to be a summary", fix) from None
    if not isinstance(data, dict):
        raise _refuse(path, "(top level)", type(data).__name__, "not a JSON object", fix)
    return data


def _count(path: Path, field: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _refuse(path, field, value, "not a whole number")
    if not low <= value <= high:
        raise _refuse(path, field, value, f"out of range ({low} to {high})")
    return value


def _percentiles(path: Path, field: str, shares: object) -> dict[str, Any]:
    """An object with p50, p95 and p99, each milliseconds or null (each present: the readers index them)."""
    if not isinstance(shares, dict):
        raise _refuse(path, field, shares, "not an object of percentiles (p50, p95, p99)")
    for key in ("p50", "p95", "p99"):
        if key not in shares:
            raise _refuse(
                path, f"{field}.{key}", MISSING, "missing (the probe writes it, null when unmeasured)"
            )
        _milliseconds(path, f"{field}.{key}", shares[key])
    return shares


def _milliseconds(path: Path, field: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _refuse(path, field, value, "not a number of milliseconds (or null)")
    if not (math.isfinite(value) and 0 <= value <= MAX_COUNT):
        raise _refuse(path, field, value, "not a finite, non-negative number of milliseconds")
    return float(value)


def check_level(path: Path, index: int, level: object) -> dict[str, Any]:
    """One `levels[]` entry, checked as the probe writes it (probe/stats.py `LevelStats.summary`)."""
    where = f"levels[{index}]"
    if not isinstance(level, dict):
        raise _refuse(path, where, level, "not a JSON object")
    # The readers (probe/report.py, planner/probe_summary.py) index these: a missing one is refused here,
    # not a KeyError there. The probe writes each of them on every level, null when it does not apply.
    for key in ("concurrency", "rate", "requests", "ok", "errors", "ttfa_ms"):
        if key not in level:
            raise _refuse(path, f"{where}.{key}", MISSING, "missing (the probe writes it on every level)")
    concurrency, rate = level["concurrency"], level["rate"]
    if (concurrency is None) == (rate is None):
        raise _refuse(path, where, {"concurrency": concurrency, "rate": rate}, "needs concurrency or rate")
    if concurrency is not None:
        _count(path, f"{where}.concurrency", concurrency, 1, MAX_CONCURRENCY)
    if rate is not None and (
        isinstance(rate, bool)
        or not isinstance(rate, int | float)
        or not (math.isfinite(rate) and 0 < rate <= MAX_RATE)
    ):
        raise _refuse(path, f"{where}.rate", rate, f"not a rate from more than 0 to {MAX_RATE:g} requests/s")
    requests = _count(path, f"{where}.requests", level["requests"], 0, MAX_COUNT)
    ok = _count(path, f"{where}.ok", level["ok"], 0, MAX_COUNT)
    if ok > requests:
        raise _refuse(path, f"{where}.ok", ok, f"more than its {requests} requests")
    ttfa = _percentiles(path, f"{where}.ttfa_ms", level["ttfa_ms"])
    if ok and ttfa["p95"] is None:
        raise _refuse(path, f"{where}.ttfa_ms.p95", None, f"missing although {ok} requests succeeded")
    for optional in ("ttfa_last_piece_ms", "ttfa_audible_ms", "total_ms"):
        if optional in level:
            _percentiles(path, f"{where}.{optional}", level[optional])
    errors = level["errors"]
    if not isinstance(errors, dict):
        raise _refuse(path, f"{where}.errors", errors, "not an object of error kinds and counts")
    for kind, count in errors.items():
        _count(path, f"{where}.errors.{kind}", count, 0, requests)
    # Each request ends ok or as one error kind (probe/stats.py `LevelStats.add`): the counts add up.
    if ok + sum(errors.values()) != requests:
        raise _refuse(
            path,
            f"{where}.errors",
            errors,
            f"{ok} ok and {sum(errors.values())} errors do not add up to its {requests} requests",
        )
    if "foreign_messages" in level:
        _count(path, f"{where}.foreign_messages", level["foreign_messages"], 0, MAX_COUNT)
    return level


def check_summary(path: Path, data: dict[str, Any], *, whole_run: bool) -> list[dict[str, Any]]:
    """The checked levels; with `whole_run`, also the run's header that `compare` prints (target, client,
    started_at)."""
    levels = data.get("levels")
    if not isinstance(levels, list):
        raise _refuse(
            path,
            "levels",
            levels,
            "missing or not a list",
            "pass a probe summary.json (it has a `levels` list)",
        )
    if whole_run:
        target = data.get("target")
        if not isinstance(target, dict) or not isinstance(target.get("route"), str):
            raise _refuse(path, "target", target, "not an object naming the route")
        if target.get("workload") == "agent":
            interval, delay = target.get("piece_interval_ms"), target.get("max_buffer_delay_ms")
            if not isinstance(target.get("split"), str):
                raise _refuse(path, "target.split", target.get("split"), "not the agent's split")
            _milliseconds(path, "target.piece_interval_ms", interval)
            _milliseconds(path, "target.max_buffer_delay_ms", delay)
            if interval is None:
                raise _refuse(path, "target.piece_interval_ms", None, "missing from an agent run")
        client = data.get("client")
        if not isinstance(client, dict) or not isinstance(client.get("host"), str):
            raise _refuse(path, "client", client, "not an object naming the client's host")
        if not isinstance(data.get("started_at"), str):
            raise _refuse(path, "started_at", data.get("started_at"), "not a time")
    checked = [check_level(path, index, level) for index, level in enumerate(levels)]
    # One level per load: `compare` keys them by it, and a capacity search tries each concurrency once.
    seen: set[tuple[object, object]] = set()
    for index, level in enumerate(checked):
        load = (level["concurrency"], level["rate"])
        if load in seen:
            raise _refuse(
                path,
                f"levels[{index}]",
                dict(zip(("concurrency", "rate"), load, strict=True)),
                "a second level at the same load",
            )
        seen.add(load)
    return checked


def read_run(folder: Path) -> dict[str, Any]:
    """A run's summary.json, checked whole (for `probe compare`)."""
    path = folder / SUMMARY
    data = read_summary_file(path)
    check_summary(path, data, whole_run=True)
    return data
