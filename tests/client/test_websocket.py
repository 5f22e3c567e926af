"""The WebSocket client against `probe serve`: whole utterances and pieces, cancel, typed errors, idle
sockets renewed, and one socket kept warm across turns."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from pathlib import Path
from typing import Any

import pytest

from sonic_deploy.client import (
    AccessError,
    EndpointUnreachableError,
    RequestTimeoutError,
    StreamError,
    ThrottledError,
    WebSocketClient,
)
from tests.probe.fault_server import CONTEXTS, PCM, fault_server
from tests.probe.private_ca import make_private_ca
from tests.standins.harness import ReferenceServer, ServerFactory
from tests.standins.real_clients import FAST, KEY, PACED, stream_bytes, wait_for_stats

VOICE = "a0e99841-438c-4a64-b679-ae501e7d6091"
# Seconds of audio in real time (PACED): long enough to act on mid-way whatever the machine's load.
LONG = "A long answer that the caller interrupts, " * 3


def _client(server: ReferenceServer, **options: Any) -> WebSocketClient:
    return WebSocketClient(server.ws_url, api_key=options.pop("api_key", KEY), model_id="sonic-3", **options)


async def _audio(chunks: Any) -> int:
    return sum([len(chunk.data) async for chunk in chunks])


def test_turns_on_one_warm_socket_arrive_whole(reference_server: ServerFactory) -> None:
    server = reference_server(*FAST)
    texts = ["Hello there.", "Your table is booked for eight."]

    async def run() -> list[int]:
        async with _client(server) as client:
            return [await _audio(client.speak(text, voice=VOICE)) for text in texts]

    assert asyncio.run(run()) == [stream_bytes(text) for text in texts]
    assert server.stats()["ws_connections"] == 1


def test_pieces_of_one_utterance_are_one_stream(reference_server: ServerFactory) -> None:
    server = reference_server(*FAST, "--audio-ms", "200")

    async def run() -> int:
        async with _client(server) as client, client.utterance(voice=VOICE) as turn:
            await turn.send("Your table is ")
            await turn.send("booked for eight.")
            await turn.end()
            return await _audio(turn)

    assert asyncio.run(run()) == 2 * stream_bytes("piece", audio_ms=200)


def test_an_idle_socket_is_renewed_before_the_next_turn(reference_server: ServerFactory) -> None:
    server = reference_server(*FAST)

    async def run() -> None:
        async with _client(server, idle_s=0.0) as client:
            for text in ("First turn.", "Second turn."):
                await asyncio.sleep(0.01)  # idle longer than idle_s
                await _audio(client.speak(text, voice=VOICE))

    asyncio.run(run())
    assert server.stats()["ws_connections"] == 2


def test_leaving_an_utterance_early_cancels_it_on_the_server(reference_server: ServerFactory) -> None:
    server = reference_server(*PACED)  # audio in real time, 60 ms a character

    async def run() -> int:
        async with _client(server) as client:
            speech = client.speak(LONG, voice=VOICE)
            async with contextlib.aclosing(speech):
                async for _ in speech:
                    break
            return await _audio(client.speak("Next.", voice=VOICE))

    assert asyncio.run(run()) == stream_bytes("Next.")
    stats = wait_for_stats(server, lambda s: s.get("cancelled", 0) == 1 and s.get("active") == 0)
    assert (stats.get("cancelled"), stats["active"]) == (1, 0)


def test_no_free_capacity_is_a_throttled_error(reference_server: ServerFactory) -> None:
    server = reference_server(*FAST, "--capacity", "0")
    with pytest.raises(ThrottledError) as raised:
        asyncio.run(_audio(_client(server).speak("Busy?", voice=VOICE)))
    assert (raised.value.kind, raised.value.status) == ("error_event_429", 429)


def test_a_wrong_key_is_an_access_error(reference_server: ServerFactory) -> None:
    server = reference_server(*FAST)
    with pytest.raises(AccessError, match="refused the key"):
        asyncio.run(_audio(_client(server, api_key="wrong").speak("Hi.", voice=VOICE)))


def test_local_mistakes_are_named_before_anything_is_sent() -> None:
    with pytest.raises(ValueError, match="not a WebSocket URL"):
        WebSocketClient("http://127.0.0.1:1/tts/websocket", api_key="k", model_id="sonic-3")
    client = WebSocketClient("ws://127.0.0.1:1/tts/websocket", api_key="k", model_id="sonic-3")
    with pytest.raises(ValueError, match="sample_rate"):
        client.utterance(voice=VOICE, sample_rate=11025)
    with pytest.raises(ValueError, match="voice"):
        client.utterance(voice="")


def test_a_silent_server_is_a_timeout_not_a_hang(reference_server: ServerFactory) -> None:
    server = reference_server(*FAST, "--fault", "stall:1", "--stall-ms", "30000")
    with pytest.raises(RequestTimeoutError) as raised:
        # timeout_s also bounds the handshake: 1.5 s is far above a local one on a busy machine, and far
        # below the 30 s the server stays silent.
        asyncio.run(_audio(_client(server, timeout_s=1.5).speak("Anyone there?", voice=VOICE)))
    assert raised.value.kind == "timeout"
    stats = wait_for_stats(server, lambda s: s.get("cancelled", 0) == 1)
    assert stats.get("cancelled") == 1, "the client gave up on the context: the server is told so"


def test_an_untrusted_certificate_is_named_and_not_retried(
    reference_server: ServerFactory, tmp_path: Path
) -> None:
    ca = make_private_ca(tmp_path)
    server = reference_server(*FAST, "--tls-cert", str(ca.cert), "--tls-key", str(ca.key), ca_file=ca.ca)
    with pytest.raises(EndpointUnreachableError) as raised:
        asyncio.run(_audio(_client(server).speak("Untrusted.", voice=VOICE)))
    assert (raised.value.kind, raised.value.retryable) == ("tls", False)
    assert "ssl_context=" in raised.value.message
    trusted = _client(server, ssl_context=ssl.create_default_context(cafile=ca.ca))
    assert asyncio.run(_audio(trusted.speak("Trusted.", voice=VOICE))) == stream_bytes("Trusted.")


@pytest.mark.parametrize(
    ("fault", "kind"), [("unknown_context_id", "unattributed"), ("truncated_json", "malformed")]
)
def test_a_message_no_utterance_can_own_is_a_stream_error_at_once_not_a_timeout(
    fault: str, kind: str
) -> None:
    """On a socket shared by three utterances, the server answers with a context id nobody sent, or a
    message that is not JSON: each utterance ends with a StreamError naming it, long before its 60 s
    timeout (the server sends nothing more for them)."""

    async def speak() -> list[BaseException | int]:
        async with fault_server() as base:
            url = f"{base.replace('http://', 'ws://')}/tts/websocket?multiplexed=1&fault={fault}"
            options: dict[str, Any] = {"contexts_per_socket": CONTEXTS, "timeout_s": 60}
            async with WebSocketClient(url, api_key=KEY, model_id="sonic-3", **options) as client:
                turns = (_audio(client.speak("Whose audio?", voice=VOICE)) for _ in range(CONTEXTS))
                return await asyncio.gather(*turns, return_exceptions=True)

    raised = asyncio.run(speak())
    assert [(e.kind, e.retryable) if isinstance(e, StreamError) else e for e in raised] == [(kind, True)] * 3


def test_on_its_own_socket_an_utterance_plays_its_audio_and_drops_another_contexts() -> None:
    """A dedicated socket (one utterance at a time): a message for another context is no part of this
    utterance, and no other's either, so it is dropped, as the official SDK drops it, and the utterance
    ends whole on its own messages."""

    async def speak() -> int:
        async with fault_server() as base:
            url = f"{base.replace('http://', 'ws://')}/tts/websocket?fault=foreign_then_own"
            async with WebSocketClient(url, api_key=KEY, model_id="sonic-3", timeout_s=60) as client:
                return await _audio(client.speak("Whose audio?", voice=VOICE))

    assert asyncio.run(speak()) == len(PCM)


def test_an_error_naming_no_context_after_audio_is_the_one_utterances_429() -> None:
    """Mid-stream, a 429 without a `context_id` on a socket with one utterance open is that utterance's,
    status kept: a ThrottledError to back off on, not a stream that cannot be attributed."""

    async def speak() -> int:
        async with fault_server() as base:
            url = (
                f"{base.replace('http://', 'ws://')}/tts/websocket?fault=error_without_context_id_after_audio"
            )
            async with WebSocketClient(url, api_key=KEY, model_id="sonic-3", timeout_s=60) as client:
                return await _audio(client.speak("Busy?", voice=VOICE))

    with pytest.raises(ThrottledError) as raised:
        asyncio.run(speak())
    assert (raised.value.kind, raised.value.status) == ("error_event_429", 429)


def test_a_refused_utterances_late_pieces_do_not_end_the_admitted_one(
    reference_server: ServerFactory,
) -> None:
    """Room for one stream; a second utterance on the same socket is refused with a 429 that names no
    context, and so is each piece it had sent before the refusal came back. Those late 429s are the refused
    utterance's: the admitted one plays whole (it was ended by them, with no audio, before)."""
    server = reference_server(*PACED, "--audio-ms", "300", "--capacity", "1", "--unnamed-refusals")

    async def run() -> tuple[int, BaseException | int]:
        async with _client(server, contexts_per_socket=2) as client, client.utterance(voice=VOICE) as first:
            await first.send("Your table is booked.", final=True)
            async with client.utterance(voice=VOICE) as second:
                for piece in ("One, ", "two, ", "three, "):
                    await second.send(piece)
                await second.send("four.", final=True)
                refused = await asyncio.gather(_audio(second), return_exceptions=True)
            played = await _audio(first)
            return played, refused[0]

    played, refused = asyncio.run(run())
    assert isinstance(refused, ThrottledError)
    assert played == stream_bytes("Your table is booked.", audio_ms=300)
    stats = server.stats()
    # The refused utterance's later pieces were each refused again, naming no context.
    assert (stats["admitted"], stats["over_capacity"], stats.get("late_refusals", 0) >= 1) == (1, 1, True)
