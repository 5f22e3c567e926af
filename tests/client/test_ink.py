"""`InkClient` against the Ink stand-in of `probe serve`: partials then a final no sooner than the speech's
end plus the server's delay, turns one after another on one session, and every failure a typed error."""

from __future__ import annotations

import asyncio
import socket

import pytest

from sonic_deploy.client import InkClient
from sonic_deploy.client.errors import (
    AccessError,
    EndpointUnreachableError,
    InvalidRequestError,
    StreamError,
)
from sonic_deploy.client.turn_hops import SpeechToText, Transcript
from sonic_deploy.standins.stt import TRANSCRIPT
from tests.standins.harness import ReferenceServer, ServerFactory
from tests.stt_speech import CHUNK_MS, FINAL_MS, TIMEOUT_S, speak, turn

KEY = "sk_test_ink"
OPTIONS = ("--api-key", KEY, "--stt-final-ms", str(FINAL_MS))


def _client(server: ReferenceServer, key: str = KEY) -> InkClient:
    return InkClient(f"ws://127.0.0.1:{server.port}", api_key=key)


@pytest.mark.parametrize(("encoding", "rate"), [("pcm_s16le", 16000), ("pcm_mulaw", 8000)])
def test_partials_then_the_final_no_sooner_than_speech_end_plus_the_delay(
    reference_server: ServerFactory, encoding: str, rate: int
) -> None:
    server = reference_server(*OPTIONS)
    client: SpeechToText = _client(server)
    assert client.name == "ink"

    async def run() -> None:
        async with await client.session(encoding=encoding, sample_rate=rate) as session:
            spoken = await turn(session, encoding, rate)
        assert spoken.partials, spoken.transcripts
        texts = [t.text for t in spoken.partials]
        assert all(TRANSCRIPT.startswith(text) for text in texts) and texts == sorted(texts, key=len)
        assert spoken.final.text == TRANSCRIPT
        assert [t.at for t in spoken.transcripts] == sorted(t.at for t in spoken.transcripts)
        # The server's guarantee: never early. Late by a busy machine's lag, within reason.
        delay = spoken.final.at - spoken.speech_end
        assert FINAL_MS / 1000 <= delay < FINAL_MS / 1000 + 1.0

    asyncio.run(run())


def test_two_turns_on_one_session(reference_server: ServerFactory) -> None:
    server = reference_server(*OPTIONS)

    async def run() -> None:
        async with await _client(server).session(encoding="pcm_s16le", sample_rate=16000) as session:
            first = await turn(session, "pcm_s16le", 16000)
            second = await turn(session, "pcm_s16le", 16000, speech_ms=400)
        for spoken in (first, second):
            assert spoken.partials and spoken.final.text == TRANSCRIPT
            assert spoken.final.at - spoken.speech_end >= FINAL_MS / 1000

    asyncio.run(run())


def test_an_encoding_the_server_refuses_is_an_invalid_request(reference_server: ServerFactory) -> None:
    server = reference_server(*OPTIONS)

    async def run() -> None:
        async with await _client(server).session(encoding="pcm_alaw", sample_rate=8000) as session:
            async with asyncio.timeout(TIMEOUT_S):
                await session.receive()

    with pytest.raises(InvalidRequestError, match="encoding") as raised:
        asyncio.run(run())
    assert raised.value.kind == "error_event_422" and raised.value.status == 422


def test_a_refused_key_is_an_access_error(reference_server: ServerFactory) -> None:
    server = reference_server(*OPTIONS)

    with pytest.raises(AccessError, match="api_key=") as raised:
        asyncio.run(_client(server, key="wrong").session(encoding="pcm_s16le", sample_rate=16000))
    assert raised.value.kind == "credentials"


def test_a_server_that_goes_away_is_a_stream_error_not_a_hang(reference_server: ServerFactory) -> None:
    server = reference_server(*OPTIONS)

    async def run() -> None:
        async with await _client(server).session(encoding="pcm_s16le", sample_rate=16000) as session:
            server.process.kill()
            async with asyncio.timeout(TIMEOUT_S):
                await session.receive()

    with pytest.raises(StreamError) as raised:
        asyncio.run(run())
    assert raised.value.kind == "cut"


def test_sending_to_a_session_the_server_closed_is_a_stream_error(reference_server: ServerFactory) -> None:
    server = reference_server(*OPTIONS)

    async def run() -> None:
        async with await _client(server).session(encoding="pcm_alaw", sample_rate=8000) as session:
            with pytest.raises(InvalidRequestError):
                async with asyncio.timeout(TIMEOUT_S):
                    await session.receive()
            async with asyncio.timeout(TIMEOUT_S):
                with pytest.raises(StreamError):
                    await session.receive()
                with pytest.raises(StreamError):
                    await speak(session.send, "pcm_mulaw", 8000, speech_ms=100, silence_ms=0)

    asyncio.run(run())


def test_nothing_listening_is_an_unreachable_endpoint() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = InkClient(f"ws://127.0.0.1:{port}", api_key=KEY, connect_timeout_s=5)
    with pytest.raises(EndpointUnreachableError) as raised:
        asyncio.run(client.session(encoding="pcm_s16le", sample_rate=16000))
    assert raised.value.kind == "refused"


def test_the_sdks_headers() -> None:
    client = InkClient(api_key=KEY)
    assert client._headers == {"cartesia-version": "2026-08-14", "Authorization": f"Bearer {KEY}"}


def test_voice_again_before_the_final_is_due_continues_the_turn(reference_server: ServerFactory) -> None:
    server = reference_server(*OPTIONS)

    async def run() -> tuple[float, list[Transcript]]:
        transcripts: list[Transcript] = []

        async def read() -> None:
            while not (transcripts and transcripts[-1].final):
                transcripts.append(await session.receive())

        async with await _client(server).session(encoding="pcm_s16le", sample_rate=16000) as session:
            async with asyncio.timeout(TIMEOUT_S):
                reader = asyncio.create_task(read())
                first_end = await speak(
                    session.send, "pcm_s16le", 16000, speech_ms=300, silence_ms=FINAL_MS // 2
                )
                await speak(session.send, "pcm_s16le", 16000, speech_ms=300)
                await reader
        # The speech's end on the stream's own timeline, as the server places it (standins/stt.py's docstring):
        # from the first audio on (whole chunks of it), not from when the second speak() began, which a busy
        # machine delays.
        silence_ms = FINAL_MS // 2 // CHUNK_MS * CHUNK_MS
        return first_end + (silence_ms + 300) / 1000, transcripts

    speech_end, transcripts = asyncio.run(run())
    assert [t.final for t in transcripts].count(True) == 1
    assert transcripts[-1].at - speech_end >= FINAL_MS / 1000
