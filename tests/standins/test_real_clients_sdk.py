"""The official `cartesia` SDK (4.2.0, pinned in pyproject.toml), unmodified, against `probe serve`: its
WebSocket contexts (one, two on one socket, continued, flushed, cancelled, timestamped), its HTTP calls
(bytes raw and WAV, streamed, SSE) and the errors it raises or receives (401, 422, 429, and its retries).

The SDK derives its WebSocket URL as `wss://` from `base_url` unless it is given `websocket_base_url`: a
plain port needs `ws://` spelled out. It authenticates with `Authorization: Bearer` and sends
`cartesia-version: 2026-08-14`."""

from __future__ import annotations

import asyncio
import io
import wave
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from cartesia import (
    AsyncCartesia,
    AuthenticationError,
    Cartesia,
    RateLimitError,
    UnprocessableEntityError,
)
from cartesia.resources.tts import AsyncWebSocketContext
from cartesia.types import RawOutputFormatParam, WAVOutputFormatParam, WebsocketResponse
from websockets.exceptions import InvalidStatus

from tests.probe.fault_server import fault_server

from .harness import ReferenceServer, ServerFactory
from .real_clients import FAST, KEY, PACED, RATE, TIMEOUT_S, counted, stream_bytes, wait_for_stats

# The SDK's sync client calls websockets' sync `connect()` directly, which websockets 17.1 deprecates.
pytestmark = pytest.mark.filterwarnings(
    "ignore:connect\\(\\) must be used as a context manager:DeprecationWarning"
)

MODEL = "sonic-3"
VOICE = "a0e99841-438c-4a64-b679-ae501e7d6091"
RAW: RawOutputFormatParam = {"container": "raw", "encoding": "pcm_s16le", "sample_rate": RATE}


def _client(server: ReferenceServer, key: str = KEY, max_retries: int = 0) -> Cartesia:
    ws_base = server.base.replace("http://", "ws://", 1)
    return Cartesia(api_key=key, base_url=server.base, websocket_base_url=ws_base, max_retries=max_retries)


def _async_client(server: ReferenceServer, key: str = KEY) -> AsyncCartesia:
    ws_base = server.base.replace("http://", "ws://", 1)
    return AsyncCartesia(api_key=key, base_url=server.base, websocket_base_url=ws_base, max_retries=0)


def _audio(events: list[WebsocketResponse]) -> bytes:
    return b"".join(event.audio or b"" for event in events if event.type == "chunk")


def _types(events: list[WebsocketResponse]) -> list[str]:
    return [event.type for event in events]


async def _drain(context: AsyncWebSocketContext) -> list[WebsocketResponse]:
    """A context's events to its end (`done` or `error`): the SDK ends `receive()` there."""

    async def events() -> list[WebsocketResponse]:
        return [event async for event in context.receive()]

    return await asyncio.wait_for(events(), TIMEOUT_S)


@pytest.fixture
def fast(reference_server: ServerFactory) -> ReferenceServer:
    """A server whose counters no test reads: every test here sees only its own streams' messages."""
    return reference_server(*FAST)


def test_one_context_on_the_sync_client(fast: ReferenceServer) -> None:
    text = "Hello there."
    with _client(fast).tts.websocket_connect() as connection:
        context = connection.context("one", model_id=MODEL, voice=VOICE, output_format=RAW)
        context.push(text, continue_=False)
        events = list(context.receive())
    kinds = _types(events)
    assert kinds[-1] == "done" and kinds.count("done") == 1
    assert set(kinds[:-1]) == {"chunk"}, "no timestamps unless asked"
    assert {event.context_id for event in events} == {"one"}
    audio = _audio(events)
    assert len(audio) == stream_bytes(text) and len(audio) % 2 == 0


def test_two_contexts_multiplexed_on_one_socket(fast: ReferenceServer) -> None:
    """Each context gets its own audio (different lengths: a mix-up would show) and exactly one done."""
    texts = {"alpha": "Alpha.", "bravo": "Bravo is rather longer."}

    async def run() -> dict[str, list[WebsocketResponse]]:
        async with _async_client(fast).tts.websocket_connect() as connection:
            contexts = {
                name: connection.context(name, model_id=MODEL, voice=VOICE, output_format=RAW)
                for name in texts
            }
            for name, context in contexts.items():
                await context.push(texts[name])
            for context in contexts.values():
                await context.no_more_inputs()
            drained = await asyncio.gather(*(_drain(context) for context in contexts.values()))
            return dict(zip(contexts, drained, strict=True))

    received = asyncio.run(run())
    for name, events in received.items():
        assert {event.context_id for event in events} == {name}
        assert _types(events).count("done") == 1 and events[-1].type == "done"
        assert len(_audio(events)) == stream_bytes(texts[name])


def test_continuations_are_one_stream_of_the_joined_text(fast: ReferenceServer) -> None:
    """push, push, no_more_inputs: one stream, chunks then one done. Pieces that end no sentence wait in
    the server's buffer (5 s at most, far beyond the few milliseconds between the sends) and are spoken
    as one text."""
    pieces = ["Hello there", "how are you"]

    async def run() -> list[WebsocketResponse]:
        async with _async_client(fast).tts.websocket_connect() as connection:
            context = connection.context(
                model_id=MODEL, voice=VOICE, output_format=RAW, max_buffer_delay_ms=5000
            )
            for piece in pieces:
                await context.push(piece)
            await context.no_more_inputs()
            return await _drain(context)

    events = asyncio.run(run())
    kinds = _types(events)
    assert kinds == ["chunk"] * (len(kinds) - 1) + ["done"]
    assert len(_audio(events)) == stream_bytes(" ".join(pieces))
    assert len(_audio(events)) > max(stream_bytes(piece) for piece in pieces)


def test_flush_done_comes_after_the_flushed_audio_and_before_done(fast: ReferenceServer) -> None:
    pieces = ["Hello there. ", "How are you?"]
    with _client(fast).tts.websocket_connect() as connection:
        context = connection.context(model_id=MODEL, voice=VOICE, output_format=RAW, max_buffer_delay_ms=0)
        context.push(pieces[0])
        context.push(pieces[1], flush=True)
        context.no_more_inputs()
        events = list(context.receive())
    kinds = _types(events)
    assert kinds.count("flush_done") == 1 and kinds.count("done") == 1
    flush = kinds.index("flush_done")
    assert set(kinds[:flush]) == {"chunk"} and kinds[flush + 1 :] == ["done"]
    flushed = events[flush]
    assert flushed.type == "flush_done" and flushed.flush_id == 1 and flushed.flush_done is True
    # Each piece ends a sentence, and max_buffer_delay_ms 0 speaks each as it comes.
    assert len(_audio(events)) == sum(stream_bytes(piece) for piece in pieces)


def test_word_timestamps_when_asked(fast: ReferenceServer) -> None:
    text = "Hello there, my old friend."
    with _client(fast).tts.websocket_connect() as connection:
        context = connection.context(model_id=MODEL, voice=VOICE, output_format=RAW, add_timestamps=True)
        context.push(text, continue_=False)
        events = list(context.receive())
    words: list[str] = []
    starts: list[float] = []
    for event in events:
        if event.type == "timestamps":
            assert event.word_timestamps is not None
            stamps = event.word_timestamps
            assert len(stamps.words) == len(stamps.start) == len(stamps.end)
            assert all(end >= start for start, end in zip(stamps.start, stamps.end, strict=True))
            words += stamps.words
            starts += stamps.start
    assert words == text.split()
    assert starts == sorted(starts)
    assert events[-1].type == "done"


def test_cancel_stops_the_context_and_releases_its_stream(reference_server: ServerFactory) -> None:
    """After `cancel()` nothing more arrives for that context. The server reads a socket's messages in
    order, so whatever of the cancelled context is still to come would follow the next context's first
    message: the cancelled one's text has seconds of audio left (real time) when the next one starts."""
    server = reference_server(*PACED)
    with _client(server).tts.websocket_connect() as connection:
        long = connection.context("long", model_id=MODEL, voice=VOICE, output_format=RAW)
        long.push("This sentence has a few seconds of audio, and is cut short.", continue_=False)
        first = next(iter(long.receive()))
        assert first.type == "chunk"
        long.cancel()
        short = connection.context("short", model_id=MODEL, voice=VOICE, output_format=RAW)
        short.push("Short.", continue_=False)
        # The raw socket, not `short.receive()`: the sync SDK hands a message of an unregistered context to
        # whichever context reads, so it could not tell them apart.
        seen: list[tuple[str | None, str]] = []
        while not seen or seen[-1] != ("short", "done"):
            event = connection.recv()
            seen.append((event.context_id, event.type))
    after = seen[[context for context, _ in seen].index("short") :]
    assert {context for context, _ in after} == {"short"}, f"the cancelled context went on: {seen}"
    assert ("long", "done") not in seen
    stats = wait_for_stats(server, lambda s: s["active"] == 0 and s.get("completed", 0) == 1)
    assert stats["cancelled"] == 1 and stats["active"] == 0
    assert stats["admitted"] == 2 and stats["completed"] == 1 and stats["interrupted"] == 1


def test_bearer_credentials_and_version_are_counted(reference_server: ServerFactory) -> None:
    """One WebSocket connection and one HTTP request, each counted with the SDK's credential form and API
    version (async client)."""
    server = reference_server(*FAST)

    async def run() -> bytes:
        client = _async_client(server)
        async with client.tts.websocket_connect() as connection:
            context = connection.context(model_id=MODEL, voice=VOICE, output_format=RAW)
            await context.push("Hi.", continue_=False)
            assert (await _drain(context))[-1].type == "done"
        response = await client.tts.generate(model_id=MODEL, transcript="Hi.", voice=VOICE, output_format=RAW)
        return await response.read()

    assert len(asyncio.run(run())) == stream_bytes("Hi.")
    stats = server.stats()
    assert counted(stats, "auth") == {"bearer": 2}
    assert counted(stats, "version") == {"2026-08-14": 2}


def test_a_wrong_key_is_refused(fast: ReferenceServer) -> None:
    client = _client(fast, key="not-the-key")
    with pytest.raises(InvalidStatus) as refused, client.tts.websocket_connect() as connection:
        connection.context(model_id=MODEL, voice=VOICE, output_format=RAW).push("Hi.", continue_=False)
    assert refused.value.response.status_code == 401
    with pytest.raises(AuthenticationError) as error:
        client.tts.generate(model_id=MODEL, transcript="Hi.", voice=VOICE, output_format=RAW)
    assert error.value.status_code == 401


# HTTP


def test_bytes_raw(fast: ReferenceServer) -> None:
    text = "Raw bytes, please."
    audio = _client(fast).tts.generate(model_id=MODEL, transcript=text, voice=VOICE, output_format=RAW).read()
    assert len(audio) == stream_bytes(text) and len(audio) % 2 == 0


def test_bytes_wav(fast: ReferenceServer) -> None:
    text = "A WAV file."
    output: WAVOutputFormatParam = {"container": "wav", "encoding": "pcm_s16le", "sample_rate": 16000}
    data = (
        _client(fast).tts.generate(model_id=MODEL, transcript=text, voice=VOICE, output_format=output).read()
    )
    with wave.open(io.BytesIO(data)) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 16000)
        frames = wav.readframes(wav.getnframes())
    assert wav.getnframes() * 2 == len(frames) == stream_bytes(text, rate=16000)


def test_streaming_response_arrives_before_the_stream_ends(reference_server: ServerFactory) -> None:
    """`with_streaming_response`: the first bytes are in hand while the server is still sending (5 s of
    audio in real time), not once the body is complete."""
    server = reference_server(*PACED, "--audio-ms", "5000")
    client = _client(server)
    with client.tts.with_streaming_response.generate(
        model_id=MODEL, transcript="Streamed.", voice=VOICE, output_format=RAW
    ) as response:
        assert response.status_code == 200
        first = next(response.iter_bytes())
        assert 0 < len(first) < stream_bytes("Streamed.", audio_ms=5000)
        assert server.stats()["active"] == 1


def _sse(server: ReferenceServer, text: str, timestamps: bool) -> Iterator[Any]:
    yield from _client(server).tts.generate_sse(
        model_id=MODEL, transcript=text, voice=VOICE, output_format=RAW, add_timestamps=timestamps
    )


@pytest.mark.parametrize("timestamps", [False, True])
def test_sse_chunks_then_done(fast: ReferenceServer, timestamps: bool) -> None:
    text = "Server sent events."
    events = list(_sse(fast, text, timestamps))
    kinds = [event.type for event in events]
    assert kinds[0] == "chunk" and kinds[-1] == "done" and kinds.count("done") == 1
    assert set(kinds[:-1]) == ({"chunk", "timestamps"} if timestamps else {"chunk"})
    audio = b"".join(event.audio or b"" for event in events if event.type == "chunk")
    assert len(audio) == stream_bytes(text)
    words = [
        word
        for event in events
        if event.type == "timestamps" and event.word_timestamps is not None
        for word in event.word_timestamps.words
    ]
    assert words == (text.split() if timestamps else [])


# Errors


def test_a_bad_sample_rate_is_422_on_http_and_an_error_event_on_the_socket(fast: ReferenceServer) -> None:
    bad: dict[str, Any] = {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 12345}
    client = _client(fast)
    with pytest.raises(UnprocessableEntityError) as refused:
        client.tts.generate(model_id=MODEL, transcript="Hi.", voice=VOICE, output_format=bad)  # type: ignore[arg-type]
    assert refused.value.status_code == 422
    assert isinstance(refused.value.body, dict) and "sample_rate" in refused.value.body["message"]
    with client.tts.websocket_connect() as connection:
        context = connection.context("bad-rate", model_id=MODEL, voice=VOICE, output_format=bad)
        context.push("Hi.", continue_=False)
        events = list(context.receive())
    assert len(events) == 1
    error = events[0]
    assert error.type == "error" and error.status_code == 422 and error.context_id == "bad-rate"
    assert error.title and error.error_code and error.message and "sample_rate" in error.message


def test_over_capacity_on_the_socket_is_an_error_event_for_that_context(
    reference_server: ServerFactory,
) -> None:
    """`--capacity 1`: a context that stays open (continued, never closed) holds the one stream; a second
    context on the same socket is refused with a 429 error event naming it. The first goes on."""
    server = reference_server(*FAST, "--capacity", "1")

    async def run() -> tuple[list[WebsocketResponse], list[WebsocketResponse]]:
        async with _async_client(server).tts.websocket_connect() as connection:
            held = connection.context(
                "held", model_id=MODEL, voice=VOICE, output_format=RAW, max_buffer_delay_ms=0
            )
            await held.push("Held open.")
            receiving = held.receive()
            assert (await asyncio.wait_for(anext(receiving), TIMEOUT_S)).type == "chunk"
            refused = connection.context("refused", model_id=MODEL, voice=VOICE, output_format=RAW)
            await refused.push("No room.", continue_=False)
            refusal = await _drain(refused)
            await held.no_more_inputs()
            rest = await asyncio.wait_for(_rest(receiving), TIMEOUT_S)
            return refusal, rest

    refusal, rest = asyncio.run(run())
    assert len(refusal) == 1
    error = refusal[0]
    assert error.type == "error" and error.status_code == 429 and error.context_id == "refused"
    assert rest[-1].type == "done"
    stats = wait_for_stats(server, lambda s: s["active"] == 0)
    assert stats["over_capacity"] == 1 and stats["admitted"] == 1 and stats["completed"] == 1


async def _rest(events: AsyncIterator[WebsocketResponse]) -> list[WebsocketResponse]:
    return [event async for event in events]


def test_a_refused_context_stays_refused(reference_server: ServerFactory) -> None:
    """The SDK's own pattern, two contexts on one socket: push, push, no_more_inputs, no_more_inputs, then
    read each to its end. `--fault status422:2` refuses the second context (the server's second stream)
    with an error event, which ends that context in the SDK (`receive()` stops at `error`, and the context
    is forgotten). The closing message the SDK had already sent for it must not start anything more: the
    sync SDK hands a message for a context it no longer knows to whichever context is reading, and a
    `done` ends that one."""
    server = reference_server(*PACED, "--fault", "status422:2")
    with _client(server).tts.websocket_connect() as connection:
        alpha = connection.context("alpha", model_id=MODEL, voice=VOICE, output_format=RAW)
        bravo = connection.context("bravo", model_id=MODEL, voice=VOICE, output_format=RAW)
        alpha.push("Alpha.")
        bravo.push("Bravo.")
        alpha.no_more_inputs()
        bravo.no_more_inputs()
        refused = [(event.type, event.context_id, event.status_code) for event in bravo.receive()]
        spoken = list(alpha.receive())
    assert refused == [("error", "bravo", 422)]
    assert [(event.type, event.context_id) for event in spoken if event.type != "chunk"] == [
        ("done", "alpha")
    ]
    assert len(_audio(spoken)) == stream_bytes("Alpha.")
    stats = wait_for_stats(server, lambda s: s["active"] == 0)
    assert stats["admitted"] == 2 and stats["fault_status422"] == 1 and stats["completed"] == 1


def test_over_capacity_on_http_is_rate_limit_error_and_retried(reference_server: ServerFactory) -> None:
    """A context held open on a socket takes the one stream of `--capacity 1`. With `max_retries=0` the SDK
    raises RateLimitError at once; with its default (2 retries) the server sees 3 attempts."""
    server = reference_server(*FAST, "--capacity", "1")
    with _client(server).tts.websocket_connect() as connection:
        held = connection.context(model_id=MODEL, voice=VOICE, output_format=RAW, max_buffer_delay_ms=0)
        held.push("Held open.")
        assert next(iter(held.receive())).type == "chunk"
        with pytest.raises(RateLimitError) as refused:
            _client(server).tts.generate(model_id=MODEL, transcript="Hi.", voice=VOICE, output_format=RAW)
        assert refused.value.status_code == 429
        assert server.stats()["over_capacity"] == 1
        with pytest.raises(RateLimitError):
            Cartesia(api_key=KEY, base_url=server.base).tts.generate(
                model_id=MODEL, transcript="Hi.", voice=VOICE, output_format=RAW
            )
        stats = server.stats()
        assert stats["over_capacity"] == 1 + 3 and stats["admitted"] == 1 and stats["active"] == 1
        # Read to the end before closing: the sync client stops reading a socket whose unread messages
        # fill its queue, and would then wait 10 s (its close timeout) for the server's close frame.
        held.no_more_inputs()
        assert list(held.receive())[-1].type == "done"


def _sdk_on_fault(fault: str) -> list[WebsocketResponse]:
    """One context of the async SDK against tests/probe/fault_server.py's `fault`, drained to its end."""

    async def run() -> list[WebsocketResponse]:
        async with fault_server() as base:
            ws_base = f"{base.replace('http://', 'ws://', 1)}/fault/{fault}"
            client = AsyncCartesia(api_key=KEY, base_url=base, websocket_base_url=ws_base, max_retries=0)
            async with client.tts.websocket_connect() as connection:
                context = connection.context("mine", model_id=MODEL, voice=VOICE, output_format=RAW)
                await context.push("Whose audio is this?", continue_=False)
                return await _drain(context)

    return asyncio.run(run())


def test_the_sdk_credits_a_context_with_its_own_messages_only() -> None:
    """What `not credited` rests on: the SDK routes by `context_id` and drops a message for a context it
    never opened (cartesia/lib/_tts.py, AsyncWebSocket._process_responses), so the stranger's chunk is no
    part of this context's audio. The probe and the client do the same on a dedicated socket (on a
    multiplexed one, they end the socket's contexts as `unattributed`: see CartesiaSocket._unattributable)."""
    events = _sdk_on_fault("foreign_then_own")
    assert _types(events) == ["chunk", "done"]
    assert {event.context_id for event in events} == {"mine"}


def test_the_sdk_reads_a_binary_frame_holding_json_as_an_event() -> None:
    """Why the probe counts JSON in binary frames as events, not `malformed`: the SDK reads every frame
    as bytes (`recv(decode=False)`) and parses it with `json.loads`."""
    events = _sdk_on_fault("binary_json")
    assert _types(events) == ["chunk", "done"] and _audio(events)


def test_the_sdk_ends_a_context_at_done_even_without_audio() -> None:
    """The SDK raises nothing for a `done` with no chunk (its `receive()` ends at `done` or `error`):
    nothing tells its caller that nothing was said, which is why the probe counts it as `no_audio`."""
    events = _sdk_on_fault("done_without_audio")
    assert _types(events) == ["done"] and not _audio(events)
