"""`probe ws --agent`: a turn sent as pieces with `continue`, on one long-lived socket per call."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sonic_deploy.cli import main
from tests.standins.harness import ServerFactory

from .harness import ProbeRun

Run = Callable[..., ProbeRun]
# Two sentences of two and three words; 40 ms of audio per piece of text the server speaks (two chunks).
TRANSCRIPT = "One two. Three four five."
FAST = ("--first-byte-ms", "10", "--audio-ms", "40", "--pace", "0")


def agent(server_url: str, *options: str) -> list[str]:
    return ["ws", "--url", server_url, "--agent", "--transcript", TRANSCRIPT, "--warmup", "0", *options]


def test_each_call_keeps_one_socket_and_each_turn_is_one_stream(
    reference_server: ServerFactory, run_probe: Run
) -> None:
    server = reference_server(*FAST)
    run = run_probe(
        *agent(server.ws_url, "--concurrency", "2", "--requests", "6", "--piece-interval-ms", "5")
    )
    assert run.exit_code == 0
    assert (run.level()["ok"], run.level()["errors"]) == (6, {})
    stats = server.stats()
    # Two calls, two sockets, reused turn after turn; one context (one admission, one done) per turn.
    assert stats["ws_connections"] == 2
    assert (stats["admitted"], stats["completed"], stats.get("cancelled", 0)) == (6, 6, 0)
    # Two sentences, each spoken as it came (max_buffer_delay_ms 0): two pieces of two chunks, one stream.
    assert all(s["chunks"] == 4 for s in run.samples)
    # The set-up is paid once per call, on its first turn.
    assert sum(s["connect_ms"] is not None for s in run.samples) == 2
    assert run.summary["target"]["workload"] == "agent"
    assert run.level()["ttfa_last_piece_ms"]["p50"] is not None


def test_a_socket_idle_too_long_is_replaced_before_the_next_turn(
    reference_server: ServerFactory, run_probe: Run
) -> None:
    server = reference_server(*FAST)
    run = run_probe(*agent(server.ws_url, "--concurrency", "1", "--requests", "3", "--idle-reconnect-s", "0"))
    assert run.level()["ok"] == 3
    assert server.stats()["ws_connections"] == 3


def test_without_a_buffer_delay_each_word_is_spoken_at_once_and_with_the_default_text_waits(
    reference_server: ServerFactory, run_probe: Run
) -> None:
    """The server speaks what it holds once a piece ends a sentence, or its buffer delay has passed: with
    the API's default (3000 ms), words wait for their sentence; with 0, each word is spoken as it comes."""
    server = reference_server(*FAST)
    words = ("--split", "word", "--piece-interval-ms", "20", "--concurrency", "1", "--requests", "2")
    at_once = run_probe(*agent(server.ws_url, *words, "--max-buffer-delay-ms", "0"))
    waited = run_probe(*agent(server.ws_url, *words, "--max-buffer-delay-ms", "default"))
    assert all(s["ok"] and s["chunks"] == 5 * 2 for s in at_once.samples)
    assert all(s["ok"] and s["chunks"] == 2 * 2 for s in waited.samples)
    # "two." is the second word, sent at least 20 ms after the first: no audio can come sooner than that
    # plus the first-byte delay.
    assert all(s["ttfa_ms"] >= 20 + 10 for s in waited.samples)
    assert waited.summary["target"]["max_buffer_delay_ms"] is None


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        (("--agent", "--multiplex", "2"), "--agent gives each call a socket of its own"),
        (("--agent", "--max-buffer-delay-ms", "6000"), "0-5000"),
        (("--sample-rate", "12345"), "invalid choice: 12345"),
        (("--agent", "--piece-interval-ms", "-1"), "--piece-interval-ms '-1': out of range"),
        (("--split", "word"), "--split shape an agent's turns: add --agent, or drop --split"),
        (
            ("--agent", "--split", "word", "--piece-interval-ms", "1000", "--timeout", "5"),
            "a turn of 14 pieces every 1000 ms takes 13 s to send, not less than --timeout 5",
        ),
    ],
)
def test_settings_the_api_or_the_mode_cannot_take_are_refused_before_the_run(
    options: tuple[str, ...], complaint: str, capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    argv = ["probe", "ws", "--url", "ws://127.0.0.1:9/tts/websocket", *options, "--out", f"{tmp_path}/o"]
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    assert code == 2
    assert complaint in capsys.readouterr().err


def test_an_error_share_the_level_cannot_measure_is_said_before_the_search(
    reference_server: ServerFactory, run_probe: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    server = reference_server(*FAST)
    run = run_probe(
        "ws", "--url", server.ws_url, "--slo", "errors<=0.1%", "--slo-max", "1", "--requests", "4"
    )
    assert run.exit_code == 0
    said = capsys.readouterr().err
    assert "--slo errors<=0.1% with --requests 4: one failed request is already 25.0%" in said
    assert "give --requests 1000 or more" in said
