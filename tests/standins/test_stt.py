"""The speech-to-text stand-ins of `probe serve` read by real clients: the official `cartesia` SDK (4.2)
on Ink's turns API, pipecat's `AWSTranscribeSTTService` on Transcribe's streaming WebSocket API; and what
the stand-ins refuse."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import websockets
from cartesia import AsyncCartesia
from cartesia.types.stt import (
    STTAutoFinalizeConnected,
    STTAutoFinalizeTurnEnd,
    STTAutoFinalizeTurnStart,
    STTAutoFinalizeTurnUpdate,
)
from cartesia.types.stt_error_response import STTErrorResponse
from pipecat.frames.frames import (
    ErrorFrame,
    Frame,
    InputAudioRawFrame,
    InterimTranscriptionFrame,
    TranscriptionFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.aws import stt as pipecat_aws_stt
from pipecat.services.aws.stt import AWSTranscribeSTTService
from pipecat.services.aws.utils import get_presigned_url
from websockets.exceptions import InvalidStatus

from sonic_deploy.client import eventstream
from sonic_deploy.client.transcribe import audio_event
from sonic_deploy.standins.stt import TRANSCRIPT
from tests.pipecat_frames import FrameRecorder, run_worker
from tests.stt_speech import FINAL_MS, TIMEOUT_S, chunk, speak

from .harness import ReferenceServer, ServerFactory

pytestmark = pytest.mark.usefixtures("quiet_pipecat")

KEY = "sk_test_stt"
OPTIONS = ("--api-key", KEY, "--stt-final-ms", str(FINAL_MS))


def _sdk(server: ReferenceServer, key: str = KEY) -> AsyncCartesia:
    return AsyncCartesia(api_key=key, base_url=server.base, max_retries=0)


def test_the_cartesia_sdk_reads_every_message_of_two_turns(reference_server: ServerFactory) -> None:
    server = reference_server(*OPTIONS)

    async def run() -> list[Any]:
        events: list[Any] = []
        async with (
            _sdk(server) as sdk,
            sdk.stt.auto_finalize.websocket(encoding="pcm_s16le", model="ink-2", sample_rate=16000) as ws,
        ):

            async def read(turns: int) -> None:
                while sum(isinstance(e, STTAutoFinalizeTurnEnd) for e in events) < turns:
                    events.append(await ws.recv())

            async with asyncio.timeout(TIMEOUT_S):
                for turns in (1, 2):
                    reader = asyncio.create_task(read(turns))
                    await speak(ws.send_raw, "pcm_s16le", 16000)
                    await reader
                await ws.send({"type": "close"})
                async for event in ws:  # the server closes once it has processed what it held
                    events.append(event)
        return events

    events = asyncio.run(run())
    # The SDK builds its models without checking them: each is checked here, every field it requires.
    for event in events:
        type(event).model_validate(event.to_dict())
    assert isinstance(events[0], STTAutoFinalizeConnected) and events[0].request_id
    kinds = [type(event) for event in events[1:]]
    half = kinds.index(STTAutoFinalizeTurnEnd) + 1
    for one in (kinds[:half], kinds[half:]):
        assert one[0] is STTAutoFinalizeTurnStart and one[-1] is STTAutoFinalizeTurnEnd
        assert set(one[1:-1]) == {STTAutoFinalizeTurnUpdate}
    updates = [e.transcript for e in events if isinstance(e, STTAutoFinalizeTurnUpdate)]
    assert all(TRANSCRIPT.startswith(text) for text in updates)
    assert [e.transcript for e in events if isinstance(e, STTAutoFinalizeTurnEnd)] == [TRANSCRIPT] * 2
    assert len({e.request_id for e in events}) == 1


def test_close_mid_turn_gives_its_end_at_once(reference_server: ServerFactory) -> None:
    server = reference_server("--stt-final-ms", "5000", "--stt-transcript", "Two, please.")

    async def run() -> list[Any]:
        async with (
            _sdk(server) as sdk,
            sdk.stt.auto_finalize.websocket(encoding="pcm_mulaw", model="ink-2", sample_rate=8000) as ws,
        ):
            async with asyncio.timeout(TIMEOUT_S):
                await speak(ws.send_raw, "pcm_mulaw", 8000, speech_ms=300, silence_ms=0)
                await ws.send({"type": "close"})
                return [event async for event in ws]

    events = asyncio.run(run())
    assert isinstance(events[-1], STTAutoFinalizeTurnEnd) and events[-1].transcript == "Two, please."


def test_a_bad_query_is_the_sdks_error_then_a_close(reference_server: ServerFactory) -> None:
    server = reference_server(*OPTIONS)

    async def run() -> list[Any]:
        async with (
            _sdk(server) as sdk,
            sdk.stt.auto_finalize.websocket(encoding="pcm_f32le", model="ink-2", sample_rate=16000) as ws,
        ):
            async with asyncio.timeout(TIMEOUT_S):
                return [event async for event in ws]

    events = asyncio.run(run())
    assert isinstance(events[-1], STTErrorResponse)
    STTErrorResponse.model_validate(events[-1].to_dict())
    assert events[-1].status_code == 422 and "encoding" in events[-1].message


def test_a_wrong_key_is_refused_at_the_handshake(reference_server: ServerFactory) -> None:
    server = reference_server(*OPTIONS)

    async def run() -> None:
        async with (
            _sdk(server, key="wrong") as sdk,
            sdk.stt.auto_finalize.websocket(encoding="pcm_s16le", model="ink-2", sample_rate=16000),
        ):
            pass

    with pytest.raises(InvalidStatus) as raised:
        asyncio.run(run())
    assert raised.value.response.status_code == 401


@pytest.fixture
def local_transcribe(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[str]]:
    """pipecat's URL builder pointed at the stand-in (it has no endpoint option): the URL it signed for
    AWS, on the stand-in's host. The test puts its server's port in the first list; the second gets the
    URLs pipecat built."""
    port: list[int] = []
    built: list[str] = []
    real = get_presigned_url  # what pipecat.services.aws.stt imports from aws.utils

    def local(**kwargs: Any) -> str:
        url = str(real(**kwargs))
        built.append(url)
        host = f"wss://transcribestreaming.{kwargs['region']}.amazonaws.com:8443"
        return url.replace(host, f"ws://127.0.0.1:{port[0]}")

    monkeypatch.setattr(pipecat_aws_stt, "get_presigned_url", local)
    return port, built


def test_pipecats_transcribe_service_yields_interim_and_final_transcriptions(
    reference_server: ServerFactory, local_transcribe: tuple[list[int], list[str]]
) -> None:
    server = reference_server(*OPTIONS)
    port, built = local_transcribe
    port.append(server.port)
    service = AWSTranscribeSTTService(region="us-east-1", sample_rate=16000)

    async def run() -> tuple[list[Frame], list[Frame]]:
        upstream = FrameRecorder(FrameDirection.UPSTREAM)
        downstream = FrameRecorder(FrameDirection.DOWNSTREAM)
        worker = PipelineWorker(
            Pipeline([upstream, service, downstream]),
            params=PipelineParams(audio_in_sample_rate=16000),
            cancel_on_idle_timeout=False,
            enable_rtvi=False,
        )

        async def send(audio: bytes) -> None:
            await worker.queue_frame(InputAudioRawFrame(audio=audio, sample_rate=16000, num_channels=1))

        async def script() -> None:
            await speak(send, "pcm_s16le", 16000)
            await downstream.wait_for(TranscriptionFrame)

        await run_worker(worker, script)
        return upstream.frames, downstream.frames

    errors, frames = asyncio.run(run())
    assert built and all("X-Amz-Signature=" in url and "sample-rate=16000" in url for url in built)
    assert not [frame for frame in errors if isinstance(frame, ErrorFrame)]
    interim = [f.text for f in frames if isinstance(f, InterimTranscriptionFrame)]
    final = [f.text for f in frames if isinstance(f, TranscriptionFrame)]
    assert interim and all(TRANSCRIPT.startswith(text) for text in interim)
    assert final == [TRANSCRIPT]


def _transcribe_url(server: ReferenceServer, query: str) -> str:
    return f"ws://127.0.0.1:{server.port}/stream-transcription-websocket?{query}"


def test_transcribe_refuses_an_unsigned_url(reference_server: ServerFactory) -> None:
    server = reference_server(*OPTIONS)
    url = _transcribe_url(server, "language-code=en-US&media-encoding=pcm&sample-rate=16000")

    async def run() -> None:
        async with websockets.connect(url):
            pass

    with pytest.raises(InvalidStatus) as raised:
        asyncio.run(run())
    assert raised.value.response.status_code == 403


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("language-code=en-US&media-encoding=ogg-opus&sample-rate=16000", "ogg-opus"),
        ("language-code=en-US&media-encoding=pcm&sample-rate=12345", "sample-rate"),
        ("media-encoding=pcm&sample-rate=16000", "language"),
    ],
)
def test_transcribe_refuses_bad_parameters_with_an_exception_frame(
    reference_server: ServerFactory, query: str, said: str
) -> None:
    server = reference_server(*OPTIONS)

    async def run() -> list[tuple[dict[str, Any], bytes]]:
        async with (
            asyncio.timeout(TIMEOUT_S),
            websockets.connect(_transcribe_url(server, f"{query}&X-Amz-Signature=0")) as ws,
        ):
            return eventstream.FrameDecoder().feed(await ws.recv(decode=False))

    ((headers, payload),) = asyncio.run(run())
    assert headers[":message-type"] == "exception"
    assert headers[":exception-type"] == "BadRequestException"
    assert said in json.loads(payload)["Message"]


def test_transcribe_ends_the_turn_at_the_empty_audio_event(reference_server: ServerFactory) -> None:
    server = reference_server("--stt-final-ms", "5000")
    query = "language-code=en-US&media-encoding=pcm&sample-rate=16000&X-Amz-Signature=0"

    async def run() -> list[dict[str, Any]]:
        results = []
        async with asyncio.timeout(TIMEOUT_S), websockets.connect(_transcribe_url(server, query)) as ws:
            await ws.send(audio_event(chunk("pcm_s16le", 16000, True)))
            await ws.send(audio_event(b""))
            async for message in ws:
                assert isinstance(message, bytes)
                for headers, payload in eventstream.FrameDecoder().feed(message):
                    assert headers[":event-type"] == "TranscriptEvent"
                    results.extend(json.loads(payload)["Transcript"]["Results"])
        return results

    results = asyncio.run(run())
    assert [r["IsPartial"] for r in results] == [True, False]
    assert results[-1]["Alternatives"][0]["Transcript"] == TRANSCRIPT
    assert len({r["ResultId"] for r in results}) == 1 and results[-1]["ChannelId"] == "ch_0"
    assert results[-1]["StartTime"] == 0.0 and results[-1]["EndTime"] == 0.02


def test_a_negative_final_delay_is_refused_by_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    from sonic_deploy.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["probe", "serve", "--stt-final-ms", "-1"])
    assert exited.value.code == 2
    assert "--stt-final-ms '-1': out of range. Fix: give milliseconds" in capsys.readouterr().err
