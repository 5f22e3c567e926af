"""Open loop without coordinated omission, worker processes merged exactly, the report, compare, the CLI."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sonic_deploy import event_loop
from sonic_deploy.cli import main
from sonic_deploy.probe.level import Level
from sonic_deploy.probe.load import ProbeSettings, TargetSpec, run_level
from sonic_deploy.probe.metrics import StreamRecorder
from sonic_deploy.probe.output import Progress, RunOutput, read_samples, read_summary
from sonic_deploy.probe.report import compare, write_report
from sonic_deploy.probe.requests import RequestTemplate
from sonic_deploy.probe.stats import LevelStats
from sonic_deploy.probe.summary_file import read_run
from tests.standins.harness import ServerFactory

from .harness import ProbeRun

Run = Callable[..., ProbeRun]
LEVEL_KEYS = {"concurrency", "rate", "requests", "ok", "errors", "ttfa_ms", "total_ms", "rtf", "underruns"}
PERCENTILE_KEYS = {"p50", "p90", "p95", "p99", "max"}


def test_open_loop_counts_latency_from_the_schedule(reference_server: ServerFactory, run_probe: Run) -> None:
    # 20 arrivals/s but one request in flight at a time, each ~110 ms: a queue builds up in the client.
    server = reference_server("--first-byte-ms", "100", "--audio-ms", "40", "--pace", "0.5")
    run = run_probe(
        "ws",
        "--url",
        server.ws_url,
        "--rate",
        "20",
        "--duration",
        "0.52",
        "--arrivals",
        "constant",
        "--max-in-flight",
        "1",
    )
    level = run.level()
    assert (level["concurrency"], level["rate"], level["requests"], level["ok"]) == (None, 20.0, 11, 11)
    # Request k cannot start before k x 100 ms (the server's delay) but was due at k x 50 ms: k x 50 ms late.
    samples = sorted(run.samples, key=lambda s: s["time"])
    lates = [s["late_ms"] for s in samples]
    assert all(late >= 50 * k - 5 for k, late in enumerate(lates))
    # Every request but the first (which a busy machine may start late too) waited for the one before.
    assert 10 <= level["late_starts"] <= 11
    # Counted from the schedule, TTFA holds the wait for the start; counted from sending it would hide it:
    # the two differ by at least how late the request started.
    assert all(s["ttfa_ms"] - s["service_ttfa_ms"] >= s["late_ms"] - 0.01 for s in samples)
    assert samples[-1]["ttfa_ms"] - samples[-1]["service_ttfa_ms"] >= 495
    assert level["ttfa_ms"]["max"] >= 600


def _sent_times(run: ProbeRun) -> list[tuple[float, bool]]:
    """(when each request was sent, on the samples' wall clock; warm-up?) in sending order."""
    sent = [(s["time"] - s["total_ms"] / 1000, s["warmup"]) for s in run.samples]
    return sorted(sent)


def test_the_automatic_ramp_up_times_one_request_alone_then_spreads_the_slots(
    reference_server: ServerFactory, run_probe: Run
) -> None:
    # Each request takes ~200 ms (100 ms to the first byte, 200 ms of audio at half pace).
    server = reference_server("--first-byte-ms", "100", "--audio-ms", "200", "--pace", "0.5")
    run = run_probe("ws", "--url", server.ws_url, "--concurrency", "4", "--requests", "8")
    assert (run.level()["requests"], run.level()["ok"]) == (8, 8)
    pilot = min(run.samples, key=lambda s: s["seq"])
    pilot_end = pilot["time"]
    sent = _sent_times(run)
    # The pilot warm-up ran alone: nothing else was sent before it finished...
    assert all(at >= pilot_end - 0.005 for at, _ in sent[1:])
    # ...and took at least as long as the pilot's request (the server makes it last 190 ms or more)...
    ramp_up_s = run.level()["ramp_up_s"]
    assert ramp_up_s >= pilot["total_ms"] / 1000 - 0.001
    assert pilot["total_ms"] >= 100 + 9 * 10
    # ...then the four slots started spread over it, slot i after i/4 of it: of the first four requests
    # after the pilot, the last is slot 3's (3/4 of the ramp-up later) or a slot's second (after a whole
    # request, 190 ms or more). Started in the same instant, all four would be sent at once.
    assert sent[4][0] - pilot_end >= min(0.75 * ramp_up_s, 0.19) - 0.005


def test_ramp_up_zero_is_passed_on(reference_server: ServerFactory, run_probe: Run) -> None:
    server = reference_server("--first-byte-ms", "100", "--audio-ms", "200", "--pace", "0.5")
    run = run_probe("ws", "--url", server.ws_url, "--concurrency", "4", "--requests", "8", "--ramp-up", "0")
    assert (run.level()["ramp_up_s"], run.level()["ok"]) == (0, 8)
    with pytest.raises(SystemExit):
        main(["probe", "ws", "--url", server.ws_url, "--ramp-up", "soon"])


class _InstantTarget:
    """Each request ends at the loop's next turn, without waiting for any clock: notes when each began and
    ended, in the order the loop ran them."""

    route = "ws"

    def __init__(self) -> None:
        self.events: list[str] = []

    async def start(self, max_in_flight: int) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def request(self, body: dict[str, Any], recorder: StreamRecorder) -> None:
        self.events.append("began")
        recorder.sent()
        await asyncio.sleep(0)  # one turn of the loop: every other ready slot runs meanwhile
        recorder.audio_bytes(b"\x00\x01" * 441, time.perf_counter())
        recorder.done()
        self.events.append("ended")


def test_ramp_up_zero_starts_every_slot_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """With `--ramp-up 0` the four slots each send a request before any request ends, whatever the load
    of the machine: no timing here, only the loop's order. A pilot run alone, or a slot that waited for
    any timer, would let a request end first."""
    target = _InstantTarget()
    monkeypatch.setattr(TargetSpec, "build", lambda spec: target)
    settings = ProbeSettings(TargetSpec(route="ws", url="ws://unused"), RequestTemplate(), ramp_up_s=0.0)
    level = Level(0, concurrency=4, requests=8, warmup=4)
    stats = event_loop.run(run_level(settings, level, 0, 1, lambda record: None))
    assert target.events[:5] == ["began"] * 4 + ["ended"]
    assert (stats.requests, stats.ok, stats.ramp_up_s) == (8, 8, 0)


def test_worker_processes_merge_into_the_same_statistics(
    reference_server: ServerFactory, run_probe: Run
) -> None:
    server = reference_server("--first-byte-ms", "30", "--audio-ms", "60", "--pace", "0.5")
    run = run_probe(
        "http", "--url", server.http_url, "--workers", "2", "--concurrency", "4", "--requests", "16"
    )
    level = run.level()
    assert (level["requests"], level["ok"]) == (16, 16)
    assert {s["worker"] for s in run.samples} == {0, 1}
    assert len(run.samples) == 16 + 4
    # The parent's merged histograms equal statistics rebuilt from every sample on disk.
    rebuilt = LevelStats()
    for sample in run.measured:
        rebuilt.add(sample)
    client_side = {"ramp_up_s", "client_gc"}  # how the client ran, not in the samples
    assert {k: v for k, v in rebuilt.summary(4, None).items() if k not in client_side} == {
        k: v for k, v in level.items() if k not in client_side
    }
    assert level["ramp_up_s"] > 0.03  # each worker timed a pilot of ~60 ms and spread its slots over it
    assert set(level["client_gc"]) == {"collections", "total_ms", "max_ms"}


def test_summary_schema_report_and_compare(
    reference_server: ServerFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = reference_server("--first-byte-ms", "20", "--audio-ms", "60", "--pace", "0.5")
    outs = [tmp_path / "ws", tmp_path / "sm"]
    common = ["--concurrency", "1,2", "--requests", "4", "--quiet"]
    assert main(["probe", "ws", "--url", server.ws_url, *common, "--out", str(outs[0])]) == 0
    assert (
        main(
            [
                "probe",
                "sagemaker",
                "--endpoint",
                "e",
                "--endpoint-url",
                server.base,
                *common,
                "--out",
                str(outs[1]),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "TTFA p50" in printed and "c=2" in printed
    run = ProbeRun(outs[0], 0)
    assert set(run.summary) >= {"target", "levels", "client", "started_at", "version"}
    assert set(run.summary["client"]) >= {"host", "cpu_count", "python"}
    for level in run.summary["levels"]:
        assert set(level) >= LEVEL_KEYS
        assert set(level["ttfa_ms"]) == set(level["total_ms"]) == set(level["rtf"]) == PERCENTILE_KEYS
    for out in outs:
        assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = compare(outs, [read_run(out) for out in outs], tmp_path / "compare.png")
    assert "A=ws" in text and "B=sm" in text and "c=1" in text and "c=2" in text
    assert (tmp_path / "compare.png").stat().st_size > 1000
    assert write_report(outs[0]) == outs[0] / "report.png"


def test_every_option_has_a_default_but_the_target() -> None:
    with pytest.raises(SystemExit) as missing:
        main(["probe", "ws"])
    assert missing.value.code == 2
    with pytest.raises(SystemExit) as bad:
        main(["probe", "http", "--url", "http://127.0.0.1:1/tts/bytes", "--concurrency", "0,2"])
    assert bad.value.code == 2


def test_the_probe_never_imports_aws_cdk() -> None:
    modules = [
        "sonic_deploy.cli",
        "sonic_deploy.probe.cli",
        "sonic_deploy.probe.run",
        "sonic_deploy.probe.load",
        "sonic_deploy.probe.workers",
        "sonic_deploy.probe.slo",
        "sonic_deploy.probe.capacity_search",
        "sonic_deploy.standins.server",
        "sonic_deploy.turn.command",
        "sonic_deploy.turn.run",
        "sonic_deploy.in_vpc.session",
        "sonic_deploy.in_vpc.task",
        "sonic_deploy.probe.report",
        "sonic_deploy.probe.targets.ws",
        "sonic_deploy.probe.targets.http",
        "sonic_deploy.probe.targets.sagemaker",
        "sonic_deploy.client.cartesia_api",
        "sonic_deploy.client.cartesia_ws",
    ]
    code = (
        f"import importlib, sys; [importlib.import_module(m) for m in {modules!r}]; "
        "print(sorted(m for m in sys.modules if m.startswith(('aws_cdk', 'constructs'))))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_an_interrupted_level_keeps_every_sample_and_a_marked_summary(tmp_path: Path) -> None:
    output = RunOutput(tmp_path, {"route": "ws"}, Progress(None))
    output.begin_level(Level(0, concurrency=2, requests=10))
    base = {"ok": True, "error": None, "ttfa_ms": 91.0, "total_ms": 500.0, "rtf": 0.5, "underruns": 0}
    for seq in range(3):
        output.record({**base, "warmup": seq == 0, "seq": seq})
    output.interrupted()
    output.close()
    output.write_summary()
    summary = read_summary(tmp_path)
    assert [(level["requests"], level["interrupted"]) for level in summary["levels"]] == [(2, True)]
    assert summary["levels"][0]["ttfa_ms"]["p50"] == pytest.approx(91.0, rel=1e-3)
    assert [s["seq"] for s in read_samples(tmp_path)] == [0, 1, 2]
    with pytest.raises(FileExistsError, match="already holds a run"):
        RunOutput(tmp_path, {"route": "ws"}, Progress(None))


class _FlakyTarget:
    """The first request fails at once (as a 429 would); the others take 100 ms. Notes when each began."""

    route = "ws"

    def __init__(self) -> None:
        self.began: list[float] = []

    async def start(self, max_in_flight: int) -> None:
        pass

    async def stop(self) -> None:
        pass

    async def request(self, body: dict[str, Any], recorder: StreamRecorder) -> None:
        self.began.append(time.perf_counter())
        if len(self.began) == 1:
            recorder.fail("error_event_429", "no free capacity")
            return
        recorder.sent()
        await asyncio.sleep(0.1)
        recorder.audio_bytes(b"\x00\x01" * 441, time.perf_counter())
        recorder.done()


def test_a_failed_pilot_tells_nothing_so_the_next_warm_up_is_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    target = _FlakyTarget()
    monkeypatch.setattr(TargetSpec, "build", lambda spec: target)
    settings = ProbeSettings(
        TargetSpec(route="ws", url="ws://unused"), RequestTemplate(), error_backoff_s=0.05
    )
    level = Level(0, concurrency=4, requests=8, warmup=4)
    stats = event_loop.run(run_level(settings, level, 0, 1, lambda record: None))
    # The second warm-up's 100 ms or more (not the failed one's instant; how much more is the machine's).
    assert stats.ramp_up_s is not None and stats.ramp_up_s >= 0.095
    failed, pilot, *rest = target.began
    # uvloop's timers run on a millisecond clock and may end a sleep up to a millisecond early.
    assert pilot >= failed + 0.045  # after the usual back-off (50 ms)
    assert all(began >= pilot + 0.095 for began in rest)  # the pilot (100 ms) ran alone
    # Four slots spread over the ramp-up, slot i from i/4 of it on: the fourth request after the pilot is
    # slot 3's (3/4 of the ramp-up after the pilot ended) or a slot's second (100 ms after its first).
    # Started at once, all four would begin as the pilot ended.
    assert rest[3] >= pilot + 0.095 + min(0.75 * stats.ramp_up_s, 0.095) - 0.002
    assert (stats.requests, stats.ok) == (8, 8)


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["serve", "--fault", "bogus:1"], "unknown fault 'bogus' in 'bogus:1'. Fix: use one of reset, stall"),
        (
            ["serve", "--fault", "stall:0"],
            "EVERY must be a whole number from 1 to 10000000 (every N-th stream). Fix: e.g. stall:10",
        ),
        (
            ["ws", "--url", "ws://127.0.0.1:9/x", "--transcripts", "/nonexistent/t.txt"],
            "--transcripts '/nonexistent/t.txt': cannot read it (No such file or directory)",
        ),
    ],
)
def test_a_bad_fault_or_transcript_file_is_an_error_naming_it_not_a_traceback(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["probe", *argv])
    assert exit_.value.code == 2
    assert complaint in capsys.readouterr().err


def test_transcripts_from_a_file_are_each_spoken(
    reference_server: ServerFactory, run_probe: Callable[..., ProbeRun], tmp_path: Path
) -> None:
    """The file is read once, when the options are parsed, and its lines are cycled through."""
    lines = tmp_path / "lines.txt"
    lines.write_text("Hi.\n\nHello there.\n", encoding="utf-8")
    server = reference_server("--first-byte-ms", "5", "--pace", "0", "--ms-per-char", "20")
    run = run_probe("ws", "--url", server.ws_url, "--transcripts", str(lines), "--concurrency", "1",
                    "--requests", "2", "--warmup", "0")  # fmt: skip
    # 20 ms of audio per character: "Hi." is 60 ms, "Hello there." 240 ms.
    assert sorted(s["audio_ms"] for s in run.samples) == [60.0, 240.0]
