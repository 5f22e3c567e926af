"""LiveKit Agents 1.8.9's Cartesia plugin (pinned in pyproject.toml), unmodified, against `probe serve`:
`TTS.synthesize()` (POST /tts/bytes) and `TTS.stream()` (the WebSocket), outside a job context (so with
an aiohttp session of its own).

The plugin sends `X-API-Key`; the API version is a header on HTTP and `?cartesia_version=` on the
WebSocket. It keeps one socket in a pool for all its streams, one context each: each sentence its
tokenizer cuts is a `continue: true` message with a trailing space, and a single space with
`continue: false` closes the context. It never sends `cancel`: a stream that stops early closes the
socket."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiohttp
import pytest
from livekit.agents import APIConnectOptions, APIError, APIStatusError
from livekit.agents.metrics import TTSMetrics
from livekit.agents.tts import SynthesizedAudio, SynthesizeStream
from livekit.agents.types import USERDATA_TIMED_TRANSCRIPT
from livekit.plugins import cartesia

from .harness import ReferenceServer, ServerFactory
from .real_clients import FAST, KEY, PACED, RATE, TIMEOUT_S, counted, stream_bytes, wait_for_stats

VOICE = "a0e99841-438c-4a64-b679-ae501e7d6091"
# No retries: a failed attempt is what the tests look at, and LiveKit waits 2 s before each retry.
ONCE = APIConnectOptions(max_retry=0, timeout=TIMEOUT_S)
# LiveKit ends each segment with a final frame; when no audio is left to send with it, the final frame
# is 10 ms of silence of its own (livekit/agents/tts/tts.py, AudioEmitter).
MARKER_BYTES = RATE // 100 * 2

T = TypeVar("T")


def _run(server: ReferenceServer, test: Callable[[cartesia.TTS], Awaitable[T]]) -> T:
    async def run() -> T:
        async with aiohttp.ClientSession() as session:
            tts = cartesia.TTS(api_key=KEY, base_url=server.base, http_session=session, voice=VOICE)
            try:
                return await asyncio.wait_for(test(tts), 2 * TIMEOUT_S)
            finally:
                await tts.aclose()

    return asyncio.run(run())


def _audio_bytes(events: list[SynthesizedAudio]) -> int:
    return sum(event.frame.data.nbytes for event in events)


def _check_audio(events: list[SynthesizedAudio], text: str) -> None:
    """24 kHz mono, the server's audio for `text`, and at most LiveKit's own closing silence."""
    assert events and events[-1].is_final
    assert {(event.frame.sample_rate, event.frame.num_channels) for event in events} == {(RATE, 1)}
    assert _audio_bytes(events) - stream_bytes(text) in (0, MARKER_BYTES)


def test_chunked_synthesize(reference_server: ServerFactory) -> None:
    server = reference_server(*FAST)
    text = "Chunked hello."

    async def test(tts: cartesia.TTS) -> list[SynthesizedAudio]:
        return [event async for event in tts.synthesize(text, conn_options=ONCE)]

    _check_audio(_run(server, test), text)
    stats = wait_for_stats(server, lambda s: s["active"] == 0)
    assert stats["admitted"] == 1 and stats["completed"] == 1
    assert counted(stats, "version") == {"2025-04-16": 1}
    assert counted(stats, "auth") == {"x-api-key": 1}


async def _speak(stream: SynthesizeStream, *texts: str) -> list[SynthesizedAudio]:
    for text in texts:
        stream.push_text(text)
    stream.flush()
    stream.end_input()
    events = [event async for event in stream]
    await stream.aclose()
    return events


def test_streams_in_a_row_share_one_socket_one_context_each(reference_server: ServerFactory) -> None:
    """Two streams, one after the other: each is one context on the server, ended by one done, and both
    go over the one socket LiveKit pools (the server counts a WebSocket's credentials and version once,
    at its handshake; LiveKit's metrics say whether the connection was reused)."""
    server = reference_server(*FAST)
    texts = ("Hello there. How are you today? ", "I am fine")
    # The server's 60 ms a character is three 20 ms chunks: however the tokenizer cuts the text, and with
    # the space LiveKit puts after each sentence, its audio is that of this text.
    spoken = "Hello there. How are you today? I am fine "

    async def test(
        tts: cartesia.TTS,
    ) -> tuple[list[list[SynthesizedAudio]], list[dict[str, object]], list[bool]]:
        reused: list[bool] = []

        def collected(metrics: TTSMetrics) -> None:
            reused.append(metrics.connection_reused)

        tts.on("metrics_collected", collected)
        streams, stats = [], []
        for _ in range(2):
            streams.append(await _speak(tts.stream(conn_options=ONCE), *texts))
            stats.append(await asyncio.to_thread(wait_for_stats, server, lambda s: s["active"] == 0))
        return streams, stats, reused

    streams, stats, reused = _run(server, test)
    for events in streams:
        _check_audio(events, spoken)
        assert len({event.segment_id for event in events}) == 1, "one segment: one context"
        words = [word for event in events for word in event.frame.userdata.get(USERDATA_TIMED_TRANSCRIPT, [])]
        assert "".join(words).split() == spoken.split(), "the word timestamps, aligned to the text sent"
    assert streams[0][0].segment_id != streams[1][0].segment_id
    assert [(s["admitted"], s["completed"]) for s in stats] == [(1, 1), (2, 2)]
    assert "interrupted" not in stats[1]
    assert counted(stats[1], "auth") == {"x-api-key": 1}, "one WebSocket handshake for both streams"
    assert counted(stats[1], "version") == {"2025-04-16": 1}
    assert counted(stats[1], "model") == {"sonic-3": 2}, "its default model, once a context"
    assert reused == [False, True]


def test_a_stream_stopped_early_closes_the_socket_and_frees_its_context(
    reference_server: ServerFactory,
) -> None:
    """LiveKit sends no `cancel`: closing a stream mid-way (an interruption) closes the pooled socket. The
    server ends the context there (audio in real time: seconds of it still to come), counted as
    interrupted, not cancelled."""
    server = reference_server(*PACED)

    async def test(tts: cartesia.TTS) -> None:
        stream = tts.stream(conn_options=ONCE)
        stream.push_text("This sentence has seconds of audio, and is stopped early. ")
        stream.end_input()
        first = await anext(aiter(stream))
        assert first.frame.data.nbytes > 0
        await stream.aclose()

    _run(server, test)
    stats = wait_for_stats(server, lambda s: s["active"] == 0)
    assert stats["active"] == 0 and stats["admitted"] == 1 and stats["interrupted"] == 1
    assert "cancelled" not in stats and "completed" not in stats


def test_errors_are_api_errors(reference_server: ServerFactory) -> None:
    """`--fault status422:1` answers every stream with a 422: an error message on the socket (`done`
    false, so that LiveKit reads it as an error and not as the end of the stream), a 422 status on
    HTTP. The plugin raises APIError for the first and APIStatusError (not retryable) for the second."""
    server = reference_server(*FAST, "--fault", "status422:1")

    async def test(tts: cartesia.TTS) -> tuple[APIError, APIStatusError]:
        with pytest.raises(APIError) as streamed:
            await _speak(tts.stream(conn_options=ONCE), "Hello there. ")
        with pytest.raises(APIStatusError) as chunked:
            async for _ in tts.synthesize("Hello there.", conn_options=ONCE):
                pass
        return streamed.value, chunked.value

    streamed, chunked = _run(server, test)
    assert "'status_code': 422" in streamed.message and "'error_code': 'invalid_request'" in streamed.message
    assert chunked.status_code == 422 and chunked.retryable is False
