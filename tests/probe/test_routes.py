"""The probe against the reference server in another process, on all three routes: it must report what the
server was told to do (first-byte delay, leading silence, faults of each kind, capacity, underruns)."""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import Callable

import pytest

from sonic_deploy.probe.reference_stream import FAULTS

from .harness import ProbeRun, ReferenceServer, ServerFactory

Run = Callable[..., ProbeRun]
# SageMaker twice: the default client (aiohttp on the event loop) and boto3's own, which must agree.
ROUTES = ["ws", "http", "sagemaker", "sagemaker-boto3"]

# What each injected fault must be counted as, per route (raw HTTP bytes cannot carry an error event).
FAULT_KINDS: dict[str, dict[str, str | None]] = {
    "ws": {
        "reset": "cut",
        "stall": "timeout",
        "malformed": "malformed",
        "error": "error_event_5xx",
        "stream_error": "cut",
        "status500": "error_event_5xx",
        "status422": "error_event_422",
    },
    "http": {
        "reset": "cut",
        "stall": "timeout",
        "malformed": None,
        "error": "cut",
        "stream_error": "cut",
        "status500": "status_5xx",
        "status422": "status_422",
    },
    "sagemaker": {
        "reset": "cut",
        "stall": "timeout",
        "malformed": "malformed",
        "error": "error_event_5xx",
        "stream_error": "model_stream_error",
        "status500": "model_error_5xx",
        "status422": "model_error_422",
    },
}
FAULT_KINDS["sagemaker-boto3"] = FAULT_KINDS["sagemaker"]
CAPACITY_KIND = {
    "ws": "error_event_429",
    "http": "status_429",
    "sagemaker": "model_error_429",
    "sagemaker-boto3": "model_error_429",
}


def target(route: str, server: ReferenceServer) -> list[str]:
    if route == "ws":
        return ["ws", "--url", server.ws_url]
    if route == "http":
        return ["http", "--url", server.http_url]
    sagemaker = ["sagemaker", "--endpoint", "reference", "--endpoint-url", server.base]
    return [*sagemaker, "--client", "boto3"] if route == "sagemaker-boto3" else sagemaker


@pytest.mark.parametrize("route", ROUTES)
def test_reports_the_injected_first_byte_delay_and_leading_silence(
    route: str, reference_server: ServerFactory, run_probe: Run
) -> None:
    server = reference_server(
        "--first-byte-ms", "60", "--audio-ms", "120", "--pace", "0.5", "--leading-silence-ms", "60"
    )
    run = run_probe(*target(route, server), "--concurrency", "1,4", "--requests", "8")
    assert run.exit_code == 0
    assert [level["concurrency"] for level in run.summary["levels"]] == [1, 4]
    for level in run.summary["levels"]:
        assert (level["requests"], level["ok"], level["errors"]) == (8, 8, {})
        ttfa, audible = level["ttfa_ms"], level["ttfa_audible_ms"]
        # Never less than the injected delay; a little more for the loopback and two event loops (loose
        # bounds: the machine may be busy; the benchmark, not this test, measures the probe's precision).
        assert 60.0 <= ttfa["p50"] < 110.0
        # Three silent 20 ms chunks sent at half real time: the first audible one leaves 30 ms later.
        assert 90.0 <= audible["p50"] < 140.0
    assert all(s["ttfa_audible_ms"] >= 90.0 for s in run.samples)
    assert len(run.samples) == 8 + 1 + 8 + 4  # measured plus warm-up, all flushed
    assert all(s["audio_ms"] == 120.0 and s["ttfa_ms"] >= 60.0 for s in run.samples)
    if route != "http":  # raw bytes carry no message boundaries: TCP may join two chunks in one read
        assert all(s["chunks"] == 6 for s in run.samples)


def expected_faults(requests: int, every: dict[str, int]) -> Counter[str]:
    """The server's rule: the n-th admitted stream gets the first fault in FAULTS whose N divides n."""
    chosen: Counter[str] = Counter()
    for n in range(1, requests + 1):
        fault = next((f for f in FAULTS if every.get(f) and n % every[f] == 0), None)
        if fault:
            chosen[fault] += 1
    return chosen


@pytest.mark.parametrize("route", ROUTES)
def test_counts_every_fault_by_kind_and_goes_on(
    route: str, reference_server: ServerFactory, run_probe: Run
) -> None:
    every = {
        "reset": 5,
        "stall": 6,
        "malformed": 7,
        "error": 11,
        "status500": 13,
        "status422": 17,
        "stream_error": 19,
    }
    options = [f"--fault={kind}:{n}" for kind, n in every.items()]
    server = reference_server(
        "--first-byte-ms", "20", "--audio-ms", "200", "--pace", "0.25", "--stall-ms", "3000", *options
    )
    run = run_probe(
        *target(route, server), "--concurrency", "4", "--requests", "40", "--warmup", "0", "--timeout", "1.0"
    )
    injected = expected_faults(40, every)
    stats = server.stats()
    assert {k: stats.get(f"fault_{k}", 0) for k in injected} == dict(injected)
    expected: Counter[str] = Counter()
    for fault, count in injected.items():
        kind = FAULT_KINDS[route][fault]
        if kind is not None:
            expected[kind] += count
    level = run.level()
    assert level["errors"] == dict(expected)
    assert level["ok"] == 40 - expected.total()
    assert level["requests"] == 40 == len(run.measured)


@pytest.mark.parametrize("route", ROUTES)
def test_capacity_rejections_match_the_server_count(
    route: str, reference_server: ServerFactory, run_probe: Run
) -> None:
    server = reference_server("--capacity", "2", "--first-byte-ms", "50", "--audio-ms", "200", "--pace", "1")
    run = run_probe(*target(route, server), "--concurrency", "4", "--requests", "12", "--warmup", "0")
    level, stats = run.level(), server.stats()
    assert level["errors"] == {CAPACITY_KIND[route]: stats["over_capacity"]}
    assert stats["over_capacity"] >= 1
    assert level["ok"] == stats["completed"] >= 2


@pytest.mark.parametrize("route", ROUTES)
def test_a_stall_shorter_than_the_timeout_is_an_underrun(
    route: str, reference_server: ServerFactory, run_probe: Run
) -> None:
    server = reference_server(
        "--first-byte-ms", "20", "--audio-ms", "400", "--pace", "0.5", "--fault", "stall:2", "--stall-ms", "500"
    )  # fmt: skip
    # A 100 ms player buffer absorbs scheduling hiccups of a busy test machine, not a 500 ms stall.
    run = run_probe(
        *target(route, server), "--concurrency", "2", "--requests", "8", "--warmup", "0",
        "--playback-delay-ms", "100",
    )  # fmt: skip
    level = run.level()
    assert level["ok"] == 8
    assert level["underruns"] == level["requests_with_underruns"] == 4
    # Playback from first byte + 100 ms with 200 ms of audio in hand runs dry 300 ms before the next chunk.
    stalled = [s for s in run.samples if s["underruns"]]
    assert all(240 <= s["underrun_ms"] <= 330 and s["max_gap_ms"] >= 500 for s in stalled)


@pytest.mark.parametrize("route", ["sagemaker", "sagemaker-boto3"])
@pytest.mark.parametrize("layout", ["split", "packed", "mixed"])
def test_sagemaker_events_split_across_or_packed_into_parts(
    layout: str, route: str, reference_server: ServerFactory, run_probe: Run
) -> None:
    server = reference_server(
        "--first-byte-ms", "20", "--audio-ms", "200", "--pace", "0.25", "--parts", layout
    )
    run = run_probe(*target(route, server), "--concurrency", "2", "--requests", "6")
    assert run.summary["target"]["client"] == ("boto3" if route == "sagemaker-boto3" else "async")
    assert run.level()["ok"] == 6
    assert all(s["ok"] and s["bytes"] == 200 * 88200 // 1000 and s["chunks"] == 10 for s in run.samples)


def test_telephony_preset_measures_mulaw_audio(reference_server: ServerFactory, run_probe: Run) -> None:
    server = reference_server(
        "--first-byte-ms", "20", "--audio-ms", "200", "--pace", "0.5", "--leading-silence-ms", "100"
    )
    run = run_probe(
        "ws", "--url", server.ws_url, "--preset", "telephony", "--concurrency", "2", "--requests", "4"
    )
    assert all(s["bytes"] == 1600 and s["ok"] for s in run.samples)  # 200 ms at 8 kHz, one byte each
    level = run.level()
    # 100 ms of leading silence in 20 ms chunks sent at half real time: audible 50 ms after the first byte.
    assert 70.0 <= level["ttfa_audible_ms"]["p50"] < 120.0
    assert all(s["ttfa_audible_ms"] >= 70.0 for s in run.samples)


def test_multiplexed_contexts_share_sockets(reference_server: ServerFactory, run_probe: Run) -> None:
    server = reference_server("--first-byte-ms", "20", "--audio-ms", "200", "--pace", "0.5")
    run = run_probe(
        "ws",
        "--url",
        server.ws_url,
        "--multiplex",
        "4",
        "--concurrency",
        "8",
        "--requests",
        "16",
        "--warmup",
        "0",
    )
    assert run.level()["ok"] == 16
    assert sum(s["connect_ms"] is not None for s in run.samples) == 2  # 8 in flight, 4 per socket


def test_websocket_handshake_status_and_api_key(reference_server: ServerFactory, run_probe: Run) -> None:
    server = reference_server("--api-key", "secret", "--first-byte-ms", "10", "--audio-ms", "40")
    refused = run_probe(
        "ws",
        "--url",
        server.ws_url,
        "--api-key",
        "wrong",
        "--concurrency",
        "2",
        "--requests",
        "4",
        "--warmup",
        "0",
    )
    assert refused.level()["errors"] == {"status_4xx": 4}
    accepted = run_probe(
        "ws",
        "--url",
        server.ws_url,
        "--api-key",
        "secret",
        "--concurrency",
        "2",
        "--requests",
        "4",
        "--warmup",
        "0",
    )
    assert accepted.level()["ok"] == 4
    assert all(s["connect_ms"] is not None for s in accepted.samples)


@pytest.mark.parametrize("route", ROUTES)
def test_a_refused_connection_is_counted_not_fatal(route: str, run_probe: Run) -> None:
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        port = probe_socket.getsockname()[1]
    urls = {
        "ws": ["ws", "--url", f"ws://127.0.0.1:{port}/tts/websocket"],
        "http": ["http", "--url", f"http://127.0.0.1:{port}/tts/bytes"],
        "sagemaker": ["sagemaker", "--endpoint", "x", "--endpoint-url", f"http://127.0.0.1:{port}"],
    }
    urls["sagemaker-boto3"] = [*urls["sagemaker"], "--client", "boto3"]
    run = run_probe(*urls[route], "--concurrency", "2", "--requests", "4", "--warmup", "0")
    assert run.exit_code == 0
    assert run.level()["errors"] == {"refused": 4}
