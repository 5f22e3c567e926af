"""`SonicSageMakerTTS` in LiveKit Agents 1.8.9's own TTS classes (pinned in pyproject.toml), against `probe
serve` speaking the SageMaker protocol, outside a job context: `synthesize()` is one request; `stream()` one
request per sentence its tokenizer cuts, audio as LiveKit's AudioEmitter frames it; `aclose()` ends the
request on the server; the client's errors as LiveKit's, retried as LiveKit retries them."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
from livekit.agents import APIConnectionError, APIConnectOptions, APIError, APIStatusError, APITimeoutError
from livekit.agents.tts import TTS, SynthesizedAudio, SynthesizeStream, TTSError
from livekit.agents.types import USERDATA_TIMED_TRANSCRIPT

from sonic_deploy.client import SageMakerClient
from sonic_deploy.client.livekit import SonicSageMakerTTS
from tests.client.refreshing import Clock, refreshing_session
from tests.standins.harness import ReferenceServer, ServerFactory
from tests.standins.real_clients import FAST, PACED, RATE, TIMEOUT_S, counted, stream_bytes, wait_for_stats

VOICE = "a0e99841-438c-4a64-b679-ae501e7d6091"
# No retries unless a test asks for them: LiveKit waits 2 s before each retry after the first.
ONCE = APIConnectOptions(max_retry=0, timeout=TIMEOUT_S)
RETRY_ONCE = APIConnectOptions(max_retry=1, retry_interval=0.0, timeout=TIMEOUT_S)
# The pieces an LLM streams, and the sentences LiveKit's default tokenizer cuts them into.
PIECES = [
    "Hello there, this is the first",
    " sentence. And here",
    " is the second one, okay? ",
    "The last one.",
]
SENTENCES = ["Hello there, this is the first sentence.", "And here is the second one, okay?", "The last one."]
# LiveKit ends a segment with a final frame; when no audio is left to send with it, the final frame is
# 10 ms of silence of its own (livekit/agents/tts/tts.py:1165-1184).
MARKER_BYTES = RATE // 100 * 2

T = TypeVar("T")


def _tts(server: ReferenceServer, **options: Any) -> SonicSageMakerTTS:
    if "client" not in options:
        options.update(endpoint_name="sonic-test", region="us-east-2", endpoint_url=server.base)
    return SonicSageMakerTTS(voice=VOICE, **options)


def _run(test: Callable[[], Awaitable[T]]) -> T:
    async def run() -> T:
        return await asyncio.wait_for(test(), 2 * TIMEOUT_S)

    return asyncio.run(run())


def _errors(tts: TTS[Any]) -> list[tuple[str, int | None, bool]]:
    """The TTS's `error` events as they come: (type, status, recoverable)."""
    seen: list[tuple[str, int | None, bool]] = []

    def on_error(event: TTSError) -> None:
        seen.append(
            (type(event.error).__name__, getattr(event.error, "status_code", None), event.recoverable)
        )

    tts.on("error", on_error)
    return seen


async def _speak(stream: SynthesizeStream, *pieces: str) -> list[SynthesizedAudio]:
    for piece in pieces:
        stream.push_text(piece)
    stream.end_input()
    async with stream:
        return [event async for event in stream]


def _by_sentence(events: list[SynthesizedAudio]) -> list[tuple[str, int]]:
    """Each sentence and the audio bytes from the frame that carries its text (the first of its audio)
    up to the next sentence's."""
    sentences: list[tuple[str, int]] = []
    for event in events:
        for text in event.frame.userdata.get(USERDATA_TIMED_TRANSCRIPT, []):
            sentences.append((str(text), 0))
        text, audio = sentences[-1]
        sentences[-1] = (text, audio + event.frame.data.nbytes)
    return sentences


def _check_frames(events: list[SynthesizedAudio]) -> None:
    """24 kHz mono, one segment, and one final frame: the last."""
    assert {(event.frame.sample_rate, event.frame.num_channels) for event in events} == {(RATE, 1)}
    assert len({(event.request_id, event.segment_id) for event in events}) == 1
    assert [event.is_final for event in events] == [False] * (len(events) - 1) + [True]


def test_synthesize_is_one_request_for_the_whole_text(reference_server: ServerFactory) -> None:
    server = reference_server(*FAST)
    text = "Chunked hello, in one request."

    async def test() -> list[SynthesizedAudio]:
        async with _tts(server) as tts:
            return [event async for event in tts.synthesize(text, conn_options=ONCE)]

    events = _run(test)
    _check_frames(events)
    assert sum(event.frame.data.nbytes for event in events) == stream_bytes(text) + MARKER_BYTES


@pytest.mark.parametrize("parts", ["split", "packed"])
def test_a_stream_is_one_request_per_sentence_in_order(parts: str, reference_server: ServerFactory) -> None:
    """Text in pieces, as an LLM streams it: each sentence the tokenizer cuts is one request, and its
    audio is that of the server's schedule for it, however SageMaker's parts cut the events."""
    server = reference_server(*FAST, "--parts", parts)

    async def test() -> list[SynthesizedAudio]:
        async with _tts(server) as tts:
            return await _speak(tts.stream(conn_options=ONCE), *PIECES)

    events = _run(test)
    _check_frames(events)
    expected = [(text, stream_bytes(text)) for text in SENTENCES]
    expected[-1] = (SENTENCES[-1], stream_bytes(SENTENCES[-1]) + MARKER_BYTES)
    assert _by_sentence(events) == expected
    starts = [text.start_time for event in events for text in event.frame.userdata[USERDATA_TIMED_TRANSCRIPT]]
    ends = [sum(map(stream_bytes, SENTENCES[:n])) / 2 / RATE for n in range(len(SENTENCES))]
    assert starts == pytest.approx(ends), "each sentence marked where its audio starts"


def test_closing_a_stream_mid_utterance_ends_its_request_on_the_server(
    reference_server: ServerFactory,
) -> None:
    """An interruption: `aclose()` after the first audio. The server sees the request closed (counted as
    interrupted, none active), the next sentence is never asked for, and nothing more arrives."""
    server = reference_server(*PACED, "--audio-ms", "5000")

    async def test() -> tuple[list[SynthesizedAudio], dict[str, Any]]:
        async with _tts(server) as tts:
            stream = tts.stream(conn_options=ONCE)
            stream.push_text("A long answer that the caller interrupts. And more after it.")
            stream.end_input()
            first = await anext(stream)
            assert first.frame.data.nbytes > 0
            await stream.aclose()
            # Read while the TTS and its client are still open: closing them would end the request anyway.
            stats = await asyncio.to_thread(
                wait_for_stats, server, lambda s: s.get("interrupted") == 1 and s["active"] == 0
            )
            return [event async for event in stream], stats

    after, stats = _run(test)
    assert after == [], "nothing arrives after aclose()"
    assert (stats["admitted"], stats.get("interrupted"), stats["active"]) == (1, 1, 0)
    assert "completed" not in stats


def test_closing_the_tts_closes_its_streams_and_the_client_it_made(reference_server: ServerFactory) -> None:
    """`TTS.aclose()` mid-utterance ends the request too, and closes a client the TTS made; a client
    passed in is the caller's, and stays open."""
    server = reference_server(*PACED, "--audio-ms", "5000")

    async def test() -> SonicSageMakerTTS:
        tts = _tts(server)
        errors = _errors(tts)
        stream = tts.synthesize("Stopped by closing the TTS.", conn_options=ONCE)
        await anext(stream)
        await tts.aclose()
        assert stream.done and errors == [], "the stream was closed, not left to fail on a closed client"
        async with SageMakerClient("sonic-test", region="us-east-2", endpoint_url=server.base) as shared:
            borrower = _tts(server, client=shared)
            await borrower.aclose()
            still_open = shared.speak("Still open.", voice=VOICE)
            async with contextlib.aclosing(still_open):
                await anext(still_open)
        return tts

    tts = _run(test)
    assert tts._client._session is None, "the TTS closed the client it made"
    stats = wait_for_stats(server, lambda s: s.get("interrupted") == 2 and s["active"] == 0)
    assert (stats["admitted"], stats.get("interrupted"), stats["active"]) == (2, 2, 0)


def test_no_free_capacity_is_a_429_that_livekit_retries_then_raises(reference_server: ServerFactory) -> None:
    """A 429 is APIStatusError(429, retryable): LiveKit emits an `error` event per attempt (recoverable
    while it retries) and raises the last one to the consumer, from `synthesize()` and `stream()` alike."""
    server = reference_server(*FAST, "--capacity", "0")

    async def test() -> tuple[list[Any], APIStatusError, APIStatusError]:
        async with _tts(server) as tts:
            errors = _errors(tts)
            with pytest.raises(APIStatusError) as chunked:
                async for _ in tts.synthesize("Busy?", conn_options=RETRY_ONCE):
                    pass
            with pytest.raises(APIStatusError) as streamed:
                await _speak(tts.stream(conn_options=RETRY_ONCE), "Still busy?")
            return errors, chunked.value, streamed.value

    errors, chunked, streamed = _run(test)
    assert errors == [("APIStatusError", 429, True), ("APIStatusError", 429, False)] * 2
    for raised in (chunked, streamed):
        assert (raised.status_code, raised.retryable) == (429, True)
        assert "model_error_429" in raised.message


def test_a_request_the_model_refuses_is_a_422_that_is_not_retried(reference_server: ServerFactory) -> None:
    server = reference_server(*FAST, "--fault", "status422:1")

    async def test() -> tuple[list[Any], APIStatusError]:
        async with _tts(server) as tts:
            errors = _errors(tts)
            with pytest.raises(APIStatusError) as raised:
                await _speak(tts.stream(conn_options=RETRY_ONCE), "Refused.")
            return errors, raised.value

    errors, raised = _run(test)
    assert errors == [("APIStatusError", 422, False)]
    assert (raised.status_code, raised.retryable) == (422, False)
    assert server.stats()["admitted"] == 1


def test_synthesize_is_not_sent_again_once_part_of_its_audio_was_pushed(
    reference_server: ServerFactory,
) -> None:
    """LiveKit's own loop would send the whole text again (its ChunkedStream does not look at what was
    pushed): the caller would hear the start of the utterance twice."""
    server = reference_server(*FAST, "--fault", "reset:1")

    async def test() -> tuple[list[Any], APIConnectionError]:
        async with _tts(server) as tts:
            errors = _errors(tts)
            with pytest.raises(APIConnectionError) as raised:
                async with tts.synthesize("Cut after its first audio.", conn_options=RETRY_ONCE) as stream:
                    async for _ in stream:
                        pass
            return errors, raised.value

    errors, raised = _run(test)
    assert errors == [("APIConnectionError", None, False)] and not raised.retryable
    assert server.stats()["admitted"] == 1


def test_a_429_on_a_later_sentence_is_retried_alone_then_raised(reference_server: ServerFactory) -> None:
    """The first sentence is spoken; another caller then takes the only slot (a stream that stalls), so
    the second sentence is refused: it is sent again once (RETRY_ONCE), refused again, and the stream
    ends with the 429 raised, the first sentence's audio whole and nothing repeated."""
    server = reference_server(*FAST, "--capacity", "1", "--fault", "stall:2", "--stall-ms", "60000")
    first = "The first sentence is spoken in full."

    async def test() -> tuple[list[Any], int, APIStatusError]:
        async with (
            _tts(server) as tts,
            SageMakerClient("other-caller", region="us-east-2", endpoint_url=server.base) as other,
        ):
            errors = _errors(tts)
            stream = tts.stream(conn_options=RETRY_ONCE)
            stream.push_text(first + " The second sentence")  # enough for the tokenizer to cut the first
            heard = 0
            while heard < stream_bytes(first):
                heard += (await anext(stream)).frame.data.nbytes
            await asyncio.to_thread(
                wait_for_stats, server, lambda s: s.get("completed") == 1 and s["active"] == 0
            )
            blocker = other.speak("The other caller holds the only slot.", voice=VOICE)
            await anext(blocker)
            stream.push_text(" is refused.")
            stream.end_input()
            with pytest.raises(APIStatusError) as raised:
                async for event in stream:
                    heard += event.frame.data.nbytes
            await blocker.aclose()
            await stream.aclose()
            return errors, heard, raised.value

    errors, heard, raised = _run(test)
    assert errors == [("APIStatusError", 429, True), ("APIStatusError", 429, False)]
    assert (raised.status_code, raised.retryable) == (429, True)
    assert heard == stream_bytes(first)
    stats = server.stats()
    assert (stats["admitted"], stats["over_capacity"]) == (2, 2)


def test_a_refused_sentence_keeps_the_caller_silent_no_longer_than_the_bound(
    reference_server: ServerFactory,
) -> None:
    """LiveKit's default options (3 retries, 0.1 s then 2 s apart) would hold a refused sentence 4.1 s; with
    `max_retry_silence_s=1.5` the waits are cut to what is left of it and the 429 is raised within it (the
    requests themselves take milliseconds: 3.5 s leaves a loaded machine room, and 4.1 s of waits none)."""
    server = reference_server(*FAST, "--capacity", "0")

    async def test() -> tuple[float, APIStatusError]:
        async with _tts(server, max_retry_silence_s=1.5) as tts:
            started = time.monotonic()
            with pytest.raises(APIStatusError) as raised:
                await _speak(tts.stream(conn_options=APIConnectOptions()), "Busy, are you?")
            return time.monotonic() - started, raised.value

    elapsed, raised = _run(test)
    assert raised.status_code == 429
    assert elapsed < 3.5
    assert 2 <= server.stats()["over_capacity"] < 1 + APIConnectOptions().max_retry


def test_a_sentence_is_sent_again_only_if_none_of_its_audio_was(reference_server: ServerFactory) -> None:
    """The second request fails before any audio (a 500): that sentence alone is sent again, and its
    audio and the first's arrive once each. The fourth request (the third sentence) is cut half-way (a
    reset): part of it was pushed, so it is not sent again, and the stream ends with the error."""
    server = reference_server(*FAST, "--fault", "status500:2", "--fault", "reset:4")

    async def test() -> tuple[list[Any], list[SynthesizedAudio], APIError]:
        async with _tts(server) as tts:
            errors = _errors(tts)
            stream = tts.stream(conn_options=RETRY_ONCE)
            for piece in PIECES:
                stream.push_text(piece)
            stream.end_input()
            events: list[SynthesizedAudio] = []
            with pytest.raises(APIError) as raised:
                async for event in stream:
                    events.append(event)
            await stream.aclose()
            return errors, events, raised.value

    errors, events, raised = _run(test)
    assert errors == [("APIStatusError", 500, True), ("APIConnectionError", None, False)]
    assert isinstance(raised, APIConnectionError) and "cut" in raised.message
    assert _by_sentence(events)[:2] == [(text, stream_bytes(text)) for text in SENTENCES[:2]]
    stats = wait_for_stats(server, lambda s: s["active"] == 0)
    assert (stats["admitted"], stats["fault_status500"], stats["fault_reset"]) == (4, 1, 1)


def test_conn_options_timeout_bounds_the_wait_for_bytes(reference_server: ServerFactory) -> None:
    """A stream that stalls mid-way: no bytes within `conn_options.timeout` is APITimeoutError, well
    before the client's own read bound would end it. (The server, asleep in its stall, sees the request
    closed only when it writes again: not counted here.)"""
    server = reference_server(*FAST, "--fault", "stall:1", "--stall-ms", "60000")

    async def test() -> float:
        began = time.monotonic()
        async with (
            SageMakerClient(
                "sonic-test", region="us-east-2", endpoint_url=server.base, read_timeout_s=120
            ) as client,
            _tts(server, client=client) as tts,
        ):
            try:
                async for _ in tts.synthesize(
                    "This one stalls half-way.", conn_options=dataclasses.replace(ONCE, timeout=0.3)
                ):
                    pass
            except APITimeoutError as error:
                assert "no bytes within 0.3 s" in error.message
                return time.monotonic() - began
        raise AssertionError("the stalled stream ended without APITimeoutError")

    assert _run(test) < 10


def test_a_refreshed_credential_signs_the_next_request(reference_server: ServerFactory) -> None:
    """Counted by access key id on the server: these two ids are this test's alone."""
    server = reference_server(*FAST)
    clock = Clock()
    session = refreshing_session(clock, ["AKIDFIRST", "AKIDSECOND"])

    async def test() -> None:
        async with _tts(server, session=session) as tts:
            await tts.synthesize("Signed with the first key.", conn_options=ONCE).collect()
            clock.now += datetime.timedelta(minutes=55)  # inside botocore's mandatory refresh window
            await tts.synthesize("Signed with the second key.", conn_options=ONCE).collect()

    _run(test)
    signed = counted(server.stats(), "access_key")
    assert {key: signed.get(key) for key in ("AKIDFIRST", "AKIDSECOND")} == {"AKIDFIRST": 1, "AKIDSECOND": 1}


def test_a_mistake_is_named_when_the_tts_is_made(reference_server: ServerFactory) -> None:
    server = reference_server(*FAST)
    with pytest.raises(ValueError, match=r"encoding 'pcm_mulaw'.*Fix: encoding='pcm_s16le'"):
        _tts(server, encoding="pcm_mulaw")
    with pytest.raises(ValueError, match=r"output_format\.sample_rate"):
        _tts(server, sample_rate=11025)
    with pytest.raises(ValueError, match="no endpoint_name"):
        SonicSageMakerTTS(voice=VOICE)
    with pytest.raises(ValueError, match=r"max_retry_silence_s=-1: not 0 to 30 seconds\. Fix: "):
        _tts(server, max_retry_silence_s=-1)
    with pytest.raises(ValueError, match=r"max_retry_silence_s='1': not 0 to 30 seconds\. Fix: "):
        _tts(server, max_retry_silence_s="1")  # a value read from the environment, unconverted


def test_the_client_package_does_not_import_livekit() -> None:
    code = "import sys, sonic_deploy.client; print(sorted(m for m in sys.modules if m.startswith('livekit')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
