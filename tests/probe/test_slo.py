"""`--slo`: its grammar, how a level is judged, and the capacity search, as pure functions (no server)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sonic_deploy.probe.capacity_search import SearchRange, SearchResult, SloSearch, search
from sonic_deploy.probe.level import Level
from sonic_deploy.probe.load import ProbeSettings, TargetSpec
from sonic_deploy.probe.metrics import StreamRecorder
from sonic_deploy.probe.output import Progress, RunOutput, read_summary
from sonic_deploy.probe.requests import RequestTemplate
from sonic_deploy.probe.slo import NO_SUCCESS, SloError, parse_slo
from sonic_deploy.probe.stats import LevelStats
from sonic_deploy.probe.workers import run_levels, run_schedule


def terms(spec: str) -> list[tuple[str, str, str | None, float]]:
    return [(t.text, t.measure, t.percentile, t.limit) for t in parse_slo(spec).terms]


def test_good_specs_parse_into_terms_in_the_summary_s_units() -> None:
    assert terms("ttfa_p95<=300ms,errors<=0.1%") == [
        ("ttfa_p95<=300ms", "ttfa_ms", "p95", 300.0),
        ("errors<=0.1%", "errors", None, pytest.approx(0.001)),
    ]
    assert terms(" ttfa_audible_p99 <= 0.5s , errors<=0 ") == [
        ("ttfa_audible_p99<=500ms", "ttfa_audible_ms", "p99", 500.0),
        ("errors<=0%", "errors", None, 0.0),
    ]
    assert terms("service_ttfa_p50<=120,total_max<=2s,max_gap_p90<=40.5ms,ttfa_ms_p99<=.3s") == [
        ("service_ttfa_p50<=120ms", "service_ttfa_ms", "p50", 120.0),
        ("total_max<=2000ms", "total_ms", "max", 2000.0),
        ("max_gap_p90<=40.5ms", "max_gap_ms", "p90", 40.5),
        ("ttfa_p99<=300ms", "ttfa_ms", "p99", 300.0),
    ]
    assert parse_slo("errors<=100%").spec == "errors<=100%"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("ttfa_p95<300ms", "bad term 'ttfa_p95<300ms': only '<=' is allowed; e.g. ttfa_p95<=300ms"),
        ("ttfa_p95>=300ms", "only '<=' is allowed"),
        ("ttfa_p95 300ms", "bad term 'ttfa_p95 300ms': no '<=' (an upper bound); e.g. ttfa_p95<=300ms"),
        ("ttfa<=300ms", "'ttfa' ends in no percentile (p50, p90, p95, p99, max)"),
        ("ttfa_p42<=300ms", "'ttfa_p42' ends in no percentile"),
        (
            "latency_p95<=300ms",
            "unknown measure 'latency' (known: ttfa, ttfa_audible, service_ttfa, ttfa_last_piece, total, ",
        ),
        ("rtf_p50<=1", "unknown measure 'rtf'"),
        ("ttfa_p95<=300us", "'300us' is not a positive duration (ms or s); e.g. ttfa_p95<=300ms"),
        ("ttfa_p95<=0ms", "'0ms' is not a positive duration"),
        ("ttfa_p95<=", "'' is not a positive duration"),
        ("ttfa_p95<=nan", "'nan' is not a positive duration"),
        ("errors<=1", "bad term 'errors<=1': '1' has no '%' (only 0 may go without); e.g. errors<=0.1%"),
        ("errors<=101%", "'101%' is not a share from 0% to 100%"),
        ("errors<=-1%", "'-1%' is not a share from 0% to 100%"),
        ("errors<5%", "only '<=' is allowed; e.g. errors<=0.1%"),
        ("ttfa_p95<=300ms,", "bad term '': empty (two commas in a row, or one at an end?)"),
        ("", "bad term '': empty"),
        ("ttfa_p95<=300ms,ttfa_p95<=0.4s", "bad term 'ttfa_p95<=0.4s': ttfa_p95 is bounded twice: keep one"),
        ("errors<=0,errors<=1%", "errors is bounded twice"),
    ],
)
def test_a_bad_term_is_named_with_what_is_wrong_and_an_example(spec: str, message: str) -> None:
    with pytest.raises(SloError) as caught:
        parse_slo(spec)
    assert message in str(caught.value)
    assert str(caught.value).endswith("(a whole spec: ttfa_p95<=300ms,errors<=0.1%)")


def test_bad_slo_on_the_command_line_is_an_argparse_error(capsys: pytest.CaptureFixture[str]) -> None:
    from sonic_deploy.cli import main

    with pytest.raises(SystemExit) as bad:
        main(["probe", "ws", "--url", "ws://127.0.0.1:1/tts/websocket", "--slo", "ttfa<=300ms"])
    assert bad.value.code == 2
    error = capsys.readouterr().err
    assert "probe ws: --slo bad term 'ttfa<=300ms': 'ttfa' ends in no percentile" in error
    assert "Traceback" not in error


def level(requests: int = 100, ok: int = 100, p95: float | None = 250.0) -> dict[str, Any]:
    quantiles = {"p50": None if p95 is None else p95 / 2, "p90": p95, "p95": p95, "p99": p95, "max": p95}
    return {"concurrency": 4, "requests": requests, "ok": ok, "ttfa_ms": quantiles}


def test_a_level_is_judged_term_by_term() -> None:
    slo = parse_slo("ttfa_p95<=300ms,errors<=1%")
    assert slo.failures(level()) == []
    assert slo.failures(level(p95=300.0, ok=99)) == []  # at the bound is within it
    assert slo.failures(level(p95=301.0, ok=98)) == [
        {"term": "ttfa_p95<=300ms", "measured": 301.0},
        {"term": "errors<=1%", "measured": 0.02},
    ]
    assert parse_slo("errors<=0.1%").failures(level(requests=1000, ok=999)) == []  # 0.1 %, not float noise
    assert parse_slo("errors<=0").failures(level(ok=99)) == [{"term": "errors<=0%", "measured": 0.01}]


def test_a_level_with_no_successful_request_fails_whatever_the_terms() -> None:
    lenient = parse_slo("errors<=100%")
    assert lenient.failures(level(ok=0, p95=None)) == [{"term": NO_SUCCESS, "measured": 100}]
    assert lenient.failures(level(requests=0, ok=0, p95=None))[0] == {"term": NO_SUCCESS, "measured": 0}
    assert parse_slo("ttfa_p50<=1s").failures(level(ok=0, p95=None)) == [
        {"term": NO_SUCCESS, "measured": 100},
        {"term": "ttfa_p50<=1000ms", "measured": None},
    ]


def drive(bounds: SearchRange, capacity: int) -> tuple[list[int], SearchResult]:
    """Run the search against a service that meets the objective up to `capacity` streams."""
    steps = search(bounds)
    tried = [next(steps)]
    try:
        while True:
            tried.append(steps.send(tried[-1] <= capacity))
    except StopIteration as done:
        return tried, done.value


def test_the_search_doubles_then_bisects_to_one_stream() -> None:
    assert drive(SearchRange(), 6) == ([1, 2, 4, 8, 6, 7], SearchResult(6, False))
    assert drive(SearchRange(), 13) == ([1, 2, 4, 8, 16, 12, 14, 13], SearchResult(13, False))
    assert drive(SearchRange(start=3), 3) == ([3, 6, 4], SearchResult(3, False))


def test_the_default_resolution_is_five_percent_of_the_passing_level() -> None:
    # Between 512 and 1024, bisection goes on while the failing level is more than 5 % above the passing one.
    tried, result = drive(SearchRange(), 700)
    assert tried == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 768, 640, 704, 672]
    assert result == SearchResult(672, False)  # 704 failed: 32 streams above, within 5 % of 672 (33.6)


def test_a_given_resolution_stops_the_bisection_sooner() -> None:
    tried, result = drive(SearchRange(resolution=10), 70)
    assert tried == [1, 2, 4, 8, 16, 32, 64, 128, 96, 80, 72]
    assert result == SearchResult(64, False)  # 72 failed, within 10 of 64


def test_a_failing_start_has_no_answer() -> None:
    assert drive(SearchRange(), 0) == ([1], SearchResult(None, False))
    assert drive(SearchRange(start=8), 4) == ([8], SearchResult(None, False))


def test_the_top_of_the_range_passing_is_said_to_bound_the_answer() -> None:
    assert drive(SearchRange(maximum=20), 1000) == ([1, 2, 4, 8, 16, 20], SearchResult(20, True))
    assert drive(SearchRange(start=5, maximum=5), 1000) == ([5], SearchResult(5, True))
    # Failing at the clamped top still bisects below it.
    assert drive(SearchRange(maximum=20), 18) == ([1, 2, 4, 8, 16, 20, 18, 19], SearchResult(18, False))


def _stats(ok: int, failed: int, ttfa_ms: float = 100.0) -> LevelStats:
    stats = LevelStats()
    for _ in range(ok):
        stats.add({"ok": True, "error": None, "ttfa_ms": ttfa_ms, "underruns": 0})
    for _ in range(failed):
        stats.add({"ok": False, "error": "status_429", "ttfa_ms": None, "underruns": 0})
    return stats


def _make_level(index: int, concurrency: int) -> Level:
    return Level(index, concurrency=concurrency, requests=10, warmup=concurrency)


def test_slo_search_judges_each_level_and_reports_what_failed() -> None:
    found = SloSearch(parse_slo("errors<=0%"), SearchRange(maximum=64), _make_level)
    levels = found.levels()
    assert next(levels) == _make_level(0, 1)
    assert levels.send(_stats(10, 0)) == _make_level(1, 2)
    assert found.as_json()["finished"] is False
    assert levels.send(_stats(10, 0)) == _make_level(2, 4)
    assert levels.send(_stats(8, 2)) == _make_level(3, 3)
    with pytest.raises(StopIteration):
        levels.send(_stats(10, 0))
    assert found.as_json() == {
        "spec": "errors<=0%",
        "terms": [
            {"term": "errors<=0%", "measure": "errors", "percentile": None, "limit": 0.0, "unit": "share"}
        ],
        "start": 1,
        "max": 64,
        "resolution": None,
        "tried": [
            {"concurrency": 1, "passed": True, "failed": []},
            {"concurrency": 2, "passed": True, "failed": []},
            {"concurrency": 4, "passed": False, "failed": [{"term": "errors<=0%", "measured": 0.2}]},
            {"concurrency": 3, "passed": True, "failed": []},
        ],
        "finished": True,
        "max_concurrency": 3,
        "bounded_by_max": False,
    }
    assert found.verdict() == "SLO errors<=0%: highest concurrency meeting it: 3 (c=4 fails)"


def test_slo_search_verdicts_without_an_answer() -> None:
    failing = SloSearch(parse_slo("ttfa_p50<=50ms"), SearchRange(start=2), _make_level)
    levels = failing.levels()
    next(levels)
    with pytest.raises(StopIteration):
        levels.send(_stats(10, 0, ttfa_ms=80.0))
    assert failing.as_json()["max_concurrency"] is None and failing.as_json()["finished"] is True
    assert failing.verdict() == (
        "SLO ttfa_p50<=50ms: no concurrency meets it: even c=2 (--slo-start) fails (ttfa_p50<=50ms)"
    )
    unfinished = SloSearch(parse_slo("errors<=0"), SearchRange(), _make_level)
    levels = unfinished.levels()
    next(levels)
    levels.send(_stats(10, 0))  # then interrupted, say
    assert unfinished.verdict() == (
        "SLO errors<=0: the search did not end, so no answer (the highest passing so far: c=1)"
    )
    bounded = SloSearch(parse_slo("errors<=0"), SearchRange(maximum=1), _make_level)
    levels = bounded.levels()
    next(levels)
    with pytest.raises(StopIteration):
        levels.send(_stats(10, 0))
    assert bounded.as_json()["bounded_by_max"] is True
    assert bounded.verdict().endswith(
        "highest concurrency meeting it: 1, the top of the search (--slo-max): the capacity may be higher"
    )


class _CapacityTarget:
    """Requests end at the loop's next turn; beyond `capacity` in flight at once, they fail as a 429 would."""

    route = "ws"

    def __init__(self, capacity: int) -> None:
        self.capacity, self.active = capacity, 0

    async def start(self, max_in_flight: int) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def request(self, body: dict[str, Any], recorder: StreamRecorder) -> None:
        import asyncio
        import time

        recorder.sent()
        if self.active >= self.capacity:
            recorder.fail("status_429", "no free capacity")
            return
        self.active += 1
        try:
            await asyncio.sleep(0.001)
            recorder.audio_bytes(b"\x00\x01" * 441, time.perf_counter())
            recorder.done()
        finally:
            self.active -= 1


def _run(
    levels: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, search: SloSearch | None = None
) -> RunOutput:
    """A schedule (a generator) or a fixed list, run in this process against `_CapacityTarget(3)`."""
    target = _CapacityTarget(capacity=3)
    monkeypatch.setattr(TargetSpec, "build", lambda spec: target)
    settings = ProbeSettings(
        TargetSpec(route="ws", url="ws://unused"), RequestTemplate(), ramp_up_s=0.0, error_backoff_s=0.0
    )
    output = RunOutput(tmp_path, {"route": "ws"}, Progress(None), search)
    if isinstance(levels, list):
        run_levels(settings, levels, 1, output)
    else:
        run_schedule(settings, levels, 1, output)
    output.close()
    return output


def test_run_schedule_sends_each_level_s_statistics_to_the_search(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    found = SloSearch(parse_slo("errors<=0%"), SearchRange(), _make_level)
    output = _run(found.levels(), monkeypatch, tmp_path / "search", found)
    assert [t["concurrency"] for t in found.tried] == [1, 2, 4, 3]
    # The search judged the last level before the sink wrote the summary for it.
    written = read_summary(tmp_path / "search")["slo"]
    assert (len(written["tried"]), written["finished"], written["max_concurrency"]) == (4, True, 3)
    assert [(level["concurrency"], level["requests"]) for level in output.levels] == [
        (1, 10),
        (2, 10),
        (4, 10),
        (3, 10),
    ]
    assert found.as_json()["max_concurrency"] == 3


def test_run_levels_runs_a_fixed_list_as_before(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    listed = _run([_make_level(0, 2), _make_level(1, 8)], monkeypatch, tmp_path / "list")
    assert [(lv["concurrency"], lv["requests"]) for lv in listed.levels] == [(2, 10), (8, 10)]
    assert listed.levels[0]["ok"] == 10 and listed.levels[1]["ok"] < 10  # 8 slots on 3 places: refusals
