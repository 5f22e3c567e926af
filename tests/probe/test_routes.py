"""The probe against the reference server in another process, on all three routes: it must report what the
server was told to do (first-byte delay, leading silence, faults of each kind, capacity, underruns)."""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import Callable

import pytest

from sonic_deploy.standins.reference_stream import FAULTS
from tests.standins.harness import ReferenceServer, ServerFactory

from .harness import ProbeRun

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
        # Never less than the injected delay. How much more (the loopback, two event loops, a busy
        # machine) is the probe's precision: bench/probe_ttfa.py measures it; no test can bound it.
        assert level["ttfa_ms"]["p50"] >= 60.0
        # Three silent 20 ms chunks sent at half real time: the first audible one leaves 30 ms later.
        assert level["ttfa_audible_ms"]["p50"] >= 90.0
    assert len(run.samples) == 8 + 1 + 8 + 4  # measured plus warm-up, all flushed
    assert all(s["audio_ms"] == 120.0 and s["ttfa_ms"] >= 60.0 for s in run.samples)
    # The first audible chunk (the fourth) cannot leave before 90 ms, nor come before the first byte.
    assert all(s["ttfa_audible_ms"] >= max(90.0, s["ttfa_ms"]) for s in run.samples)
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


# The stall test's server: 10 chunks of 20 ms (its default) sent every 10 ms from 20 ms after each request,
# and every second stream held STALL_MS before its sixth chunk.
FIRST_BYTE_MS, AUDIO_MS, CHUNK_MS, PACE, STALL_MS = 20, 200, 20, 0.5, 600
PLAYBACK_DELAY_MS = 100


@pytest.mark.parametrize("route", ROUTES)
def test_a_stall_shorter_than_the_timeout_is_an_underrun(
    route: str, reference_server: ServerFactory, run_probe: Run
) -> None:
    server = reference_server(
        "--first-byte-ms", str(FIRST_BYTE_MS), "--audio-ms", str(AUDIO_MS), "--pace", str(PACE),
        "--fault", "stall:2", "--stall-ms", str(STALL_MS),
    )  # fmt: skip
    # One request at a time, so that the n-th to finish (seq n - 1) is the n-th the server admitted: the
    # second and the fourth are the stalled ones.
    run = run_probe(
        *target(route, server), "--concurrency", "1", "--requests", "4", "--warmup", "0",
        "--playback-delay-ms", str(PLAYBACK_DELAY_MS),
    )  # fmt: skip
    level = run.level()
    assert level["ok"] == 4
    assert server.stats()["fault_stall"] == 2
    last_chunk_ms = FIRST_BYTE_MS + (AUDIO_MS // CHUNK_MS - 1) * CHUNK_MS * PACE  # after arrival, unstalled
    stalled = [s for s in run.samples if s["seq"] % 2 == 1]
    # What the server guarantees: a stalled stream's last chunk leaves no earlier than STALL_MS later.
    assert all(s["total_ms"] >= last_chunk_ms + STALL_MS for s in stalled)
    # The player starts PLAYBACK_DELAY_MS after the first byte, plays the AUDIO_MS it gets, and silence
    # where it ran dry; it cannot end before the last chunk has come and played. So its silence is at least
    # (last chunk + its 20 ms) - (first byte + delay + audio), whatever the machine's load did to the other
    # chunks: 430 ms less how late the first byte was (ttfa_ms - 20 ms).
    silence_ms = last_chunk_ms + STALL_MS + CHUNK_MS - PLAYBACK_DELAY_MS - AUDIO_MS
    for sample in stalled:
        assert sample["underrun_ms"] + sample["ttfa_ms"] >= silence_ms, sample
        assert sample["underruns"] >= 1, sample  # 430 ms of silence, unless the first byte was as late
    # A stream that was not stalled may run dry too, on a busy machine: at least the stalled ones did.
    assert level["requests_with_underruns"] >= 2
    assert level["underruns"] == sum(s["underruns"] for s in run.measured)
    assert level["requests_with_underruns"] == sum(s["underruns"] > 0 for s in run.measured)


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
    # 100 ms of leading silence in 20 ms chunks sent at half real time: the first audible chunk (the
    # sixth) leaves 50 ms after the first, 70 ms after the request; how much later it arrives, the
    # benchmark measures.
    assert all(s["ttfa_audible_ms"] >= max(70.0, s["ttfa_ms"]) for s in run.samples)
    assert run.level()["ttfa_audible_ms"]["p50"] >= 70.0


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
