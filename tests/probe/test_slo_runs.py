"""`--slo` end to end: the search finds the reference server's `--capacity`, in one process or in two.

Only what the server guarantees is asserted: with `--capacity N`, a level of more than N slots has more
streams wanted than admitted for as long as its measured requests last, so it gets 429s; a level of N or
fewer never does (the server releases a stream before its client can send the next). Latency terms are
either far above what the server takes (`ttfa_p50<=5000ms` on a 20 ms first byte) or below what it must
take (`ttfa_p50<=20ms` on a 50 ms first byte: TTFA cannot be shorter than the server's delay).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from pathlib import Path

import pytest

from sonic_deploy.cli import main
from sonic_deploy.probe.report import compare, write_report
from sonic_deploy.probe.summary_file import read_run
from tests.standins.harness import ServerFactory

from .harness import ProbeRun

Run = Callable[..., ProbeRun]
# Slots refused by the server retry soon, so that a level over capacity keeps asking.
FAST = ["--error-backoff-ms", "20"]


def test_the_search_finds_the_server_s_capacity_exactly(
    reference_server: ServerFactory, run_probe: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = reference_server("--capacity", "6", "--first-byte-ms", "20", "--audio-ms", "60")
    spec = "errors<=0%,ttfa_p50<=5000ms"
    run = run_probe("ws", "--url", server.ws_url, "--slo", spec, "--requests", "30", *FAST)
    assert run.exit_code == 0
    slo = run.summary["slo"]
    assert (slo["spec"], slo["max_concurrency"], slo["bounded_by_max"], slo["finished"]) == (
        spec,
        6,
        False,
        True,
    )
    assert [term["term"] for term in slo["terms"]] == ["errors<=0%", "ttfa_p50<=5000ms"]
    # Doubling to the first failure (8), then bisection between 4 and 8 down to one stream.
    tried = [(t["concurrency"], t["passed"]) for t in slo["tried"]]
    assert tried == [(1, True), (2, True), (4, True), (8, False), (6, True), (7, False)]
    for failing in (t for t in slo["tried"] if not t["passed"]):
        assert [f["term"] for f in failing["failed"]] == ["errors<=0%"] and failing["failed"][0][
            "measured"
        ] > 0
    # Each tried level is an ordinary level: in the summary and in the samples, in the order it ran.
    levels = run.summary["levels"]
    assert [level["concurrency"] for level in levels] == [1, 2, 4, 8, 6, 7]
    assert all(level["requests"] == 30 for level in levels)
    assert [level["errors"] == {} for level in levels] == [True, True, True, False, True, False]
    assert set(levels[3]["errors"]) == {"error_event_429"}
    assert len(run.measured) == 6 * 30
    assert [sorted({s["level"] for s in run.samples if s["concurrency"] == c}) for c in (1, 8, 7)] == [
        [0],
        [3],
        [5],
    ]
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].split()[:3] == ["load", "SLO", "reqs"]
    assert [line.split()[:2] for line in printed[1:7]] == [
        ["c=1", "pass"],
        ["c=2", "pass"],
        ["c=4", "pass"],
        ["c=8", "FAIL"],
        ["c=6", "pass"],
        ["c=7", "FAIL"],
    ]
    assert "breaks errors<=0% (was " in printed[4]
    assert printed[7] == f"SLO {spec}: highest concurrency meeting it: 6 (c=7 fails)"
    # The report and compare take a summary with `slo` beside one without.
    assert write_report(run.out).stat().st_size > 1000
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "summary.json").write_text(json.dumps({k: v for k, v in run.summary.items() if k != "slo"}))
    text = compare([run.out, plain], [read_run(run.out), read_run(plain)], tmp_path / "compare.png")
    assert all(f"c={c}" in text for c in (1, 2, 4, 6, 7, 8))


def test_the_search_runs_in_worker_processes_started_once(
    reference_server: ServerFactory, run_probe: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[str] = []
    real_start = BaseProcess.start

    def counted_start(process: BaseProcess) -> None:
        started.append(process.name)
        real_start(process)

    monkeypatch.setattr(BaseProcess, "start", counted_start)
    server = reference_server("--capacity", "2", "--first-byte-ms", "20", "--audio-ms", "100")
    run = run_probe(
        "ws", "--url", server.ws_url, "--workers", "2", "--slo", "errors<=0", "--requests", "12", *FAST
    )
    slo = run.summary["slo"]
    assert [(t["concurrency"], t["passed"]) for t in slo["tried"]] == [
        (1, True),
        (2, True),
        (4, False),
        (3, False),
    ]
    assert slo["max_concurrency"] == 2
    assert len(started) == 2  # two workers for the four levels
    assert [level["requests"] for level in run.summary["levels"]] == [12] * 4
    assert {s["worker"] for s in run.samples if s["concurrency"] == 2} == {0, 1}


def test_a_failing_start_has_no_answer_and_says_so(
    reference_server: ServerFactory, run_probe: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    server = reference_server("--first-byte-ms", "50", "--audio-ms", "60")
    run = run_probe("ws", "--url", server.ws_url, "--slo", "ttfa_p50<=20ms", "--requests", "4")
    assert run.exit_code == 0  # the run worked: its levels are measurements
    slo = run.summary["slo"]
    assert (slo["max_concurrency"], slo["finished"], [t["concurrency"] for t in slo["tried"]]) == (
        None,
        True,
        [1],
    )
    assert slo["tried"][0]["failed"][0]["term"] == "ttfa_p50<=20ms"
    assert slo["tried"][0]["failed"][0]["measured"] >= 50
    assert (
        "sonic-deploy probe: SLO ttfa_p50<=20ms: no concurrency meets it: even c=1 (--slo-start) fails "
        "(ttfa_p50<=20ms)" in capsys.readouterr().err
    )


def test_the_top_of_the_range_passing_bounds_the_answer(
    reference_server: ServerFactory, run_probe: Run
) -> None:
    server = reference_server("--first-byte-ms", "50", "--audio-ms", "60")
    run = run_probe("ws", "--url", server.ws_url, "--slo", "errors<=0", "--slo-max", "2", "--requests", "4")
    slo = run.summary["slo"]
    assert (slo["max_concurrency"], slo["bounded_by_max"], slo["max"]) == (2, True, 2)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--rate", "5"], "--slo searches closed-loop concurrency: drop --rate"),
        (["--concurrency", "4,8"], "--slo chooses the concurrency levels itself: drop --concurrency"),
        (["--slo-start", "8", "--slo-max", "4"], "--slo-start 8 is above --slo-max 4"),
    ],
)
def test_options_the_search_cannot_take_are_refused(
    options: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["probe", "ws", "--url", "ws://127.0.0.1:1/tts/websocket", "--slo", "errors<=0", *options]
    with pytest.raises(SystemExit) as refused:
        main([*argv, "--out", str(out)])
    assert refused.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert message in line
    assert not out.exists()
    with pytest.raises(SystemExit):
        main([*argv[:4], "--slo", "errors<=0", "--slo-max", "0"])
