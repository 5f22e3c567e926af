"""Measured streams per instance from a probe summary.json (the probe's published schema)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sonic_deploy.config import ConfigError
from sonic_deploy.planner.probe_summary import measured_streams

# Cartesia's published TTFA p95 by concurrency (Sonic 3.5): 1: 55, 2: 55, 4: 115, 8: 165, 12: 225, 16: 300 ms.
PUBLISHED = {1: 55.0, 2: 55.0, 4: 115.0, 8: 165.0, 12: 225.0, 16: 300.0}


def level(concurrency: int | None, p95: float | None, requests: int = 200, ok: int = 200) -> dict[str, Any]:
    quantiles = {"p50": p95, "p90": p95, "p95": p95, "p99": p95, "max": p95}
    return {
        "concurrency": concurrency,
        "rate": None if concurrency is not None else 5.0,
        "requests": requests,
        "ok": ok,
        "errors": {} if ok == requests else {"429": requests - ok},
        "ttfa_ms": quantiles,
        "total_ms": quantiles,
        "rtf": {"p50": 0.2, "p90": 0.2, "p95": 0.2, "p99": 0.2, "max": 0.2},
        "underruns": 0,
    }


def summary(tmp_path: Path, levels: list[dict[str, Any]]) -> Path:
    path = tmp_path / "summary.json"
    body = {
        "target": {"kind": "sagemaker"},
        "levels": levels,
        "client": {},
        "started_at": "x",
        "version": "1",
    }
    path.write_text(json.dumps(body))
    return path


def test_highest_level_under_the_budget(tmp_path: Path) -> None:
    path = summary(tmp_path, [level(c, p) for c, p in reversed(PUBLISHED.items())])  # order does not matter
    assert measured_streams(path, 200).streams == 8  # 12 has p95 225 > 200
    assert measured_streams(path, 250).streams == 12
    assert measured_streams(path, 300).streams == 16  # "stays under" includes equal
    found = measured_streams(path, 170)
    assert (found.streams, found.ttfa_p95_ms, found.budget_ms) == (8, 165.0, 170)


def test_a_lucky_level_after_a_failing_one_does_not_count(tmp_path: Path) -> None:
    path = summary(tmp_path, [level(4, 115), level(8, 260), level(12, 190)])
    assert measured_streams(path, 200).streams == 4


def test_a_level_with_too_many_errors_stops_the_climb(tmp_path: Path) -> None:
    # 2 of 200 failed (1 %) is tolerated; 3 of 200 (1.5 %) is not.
    tolerated = summary(tmp_path, [level(4, 100), level(8, 150, ok=198), level(12, 180)])
    assert measured_streams(tolerated, 200).streams == 12
    failing = summary(tmp_path, [level(4, 100), level(8, 150, ok=197), level(12, 180)])
    assert measured_streams(failing, 200).streams == 4


def test_rate_levels_are_skipped_and_a_failed_level_without_latency_ends_the_climb(tmp_path: Path) -> None:
    path = summary(tmp_path, [level(None, 50), level(2, 60), level(4, None, ok=0), level(8, 100)])
    assert measured_streams(path, 200).streams == 2


def test_no_level_within_budget_names_the_field_and_fix(tmp_path: Path) -> None:
    path = summary(tmp_path, [level(2, 400), level(4, 500)])
    with pytest.raises(ConfigError) as caught:
        measured_streams(path, 200)
    assert str(caught.value) == (
        f"{path}: levels[concurrency=2].ttfa_ms.p95 = 400.0: even the lowest level breaks the 200 ms budget or "
        "fails more than 1% of requests (200 of 200 ok). Fix: raise --ttfa-budget-ms, or probe lower "
        "concurrency levels"
    )


def test_unreadable_summaries_are_config_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ConfigError, match=r"broken.json: \(syntax\) = .*not JSON"):
        measured_streams(broken, 200)
    with pytest.raises(ConfigError, match=r"missing.json: \(file\) = .*cannot read"):
        measured_streams(tmp_path / "missing.json", 200)
    with pytest.raises(ConfigError, match=r"levels = None: missing or not a list"):
        measured_streams(summary(tmp_path, None), 200)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"levels\[0\].rate = \(missing\): missing"):
        measured_streams(summary(tmp_path, [{"concurrency": 4}]), 200)


def searched(tmp_path: Path, slo: dict[str, Any] | None, levels: list[dict[str, Any]] | None = None) -> Path:
    """A summary of `probe --slo`: its levels in the order the search ran them, and its `slo` object."""
    path = summary(tmp_path, levels or [level(c, PUBLISHED[c]) for c in (1, 2, 4, 8, 16, 12)])
    body = json.loads(path.read_text())
    path.write_text(json.dumps({**body, "slo": slo}))
    return path


SLO = {
    "spec": "ttfa_p95<=250ms,errors<=0.1%",
    "finished": True,
    "max_concurrency": 12,
    "bounded_by_max": False,
}


def test_an_slo_search_s_answer_is_the_figure_and_the_budget_is_not_applied(tmp_path: Path) -> None:
    path = searched(tmp_path, SLO)
    found = measured_streams(path, 200)  # the budget alone would stop at 8 (12 has p95 225 > 200)
    assert (found.streams, found.ttfa_p95_ms, found.slo, found.bounded_by_max) == (
        12,
        225.0,
        SLO["spec"],
        False,
    )
    assert found.describe() == (
        "probe: summary.json, SLO search ttfa_p95<=250ms,errors<=0.1%: highest concurrency meeting it, "
        "TTFA p95 225 ms; --ttfa-budget-ms not applied"
    )
    bounded = measured_streams(
        searched(tmp_path, {**SLO, "max_concurrency": 16, "bounded_by_max": True}), 300
    )
    assert bounded.streams == 16 and "meeting it (the top of its search: may be higher)" in bounded.describe()


def test_an_slo_search_without_an_answer_gives_no_figure(tmp_path: Path) -> None:
    path = searched(tmp_path, {**SLO, "max_concurrency": None})
    with pytest.raises(ConfigError) as caught:
        measured_streams(path, 300)
    assert str(caught.value).startswith(
        f"{path}: slo.max_concurrency = None: the probe's SLO search found no concurrency meeting "
        "ttfa_p95<=250ms,errors<=0.1% (even its first level failed). Fix: probe again from a lower --slo-start"
    )


def test_an_unfinished_slo_search_is_read_as_a_sweep_by_the_budget(tmp_path: Path) -> None:
    path = searched(tmp_path, {**SLO, "finished": False, "max_concurrency": None})
    found = measured_streams(path, 200)
    assert (found.streams, found.slo) == (8, None)
    assert found.describe() == "probe: summary.json, TTFA p95 165 ms <= 200 ms"


def test_a_broken_slo_object_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"slo = \['x'\]: not the probe's SLO search"):
        measured_streams(searched(tmp_path, ["x"]), 200)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"slo.max_concurrency = 5: not the concurrency of one of the"):
        measured_streams(searched(tmp_path, {**SLO, "max_concurrency": 5}), 200)
