"""`SonicSageMakerTTSService` in a real pipecat 1.14 pipeline against `probe serve`'s SageMaker route:
frames go in at the pipeline's source and what the service pushes is recorded on both sides of it (audio,
text and metrics downstream, errors upstream). Nothing here times anything: each step waits for the
frame or the server counter it needs."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from pipecat.frames.frames import (
    ErrorFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    MetricsFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.metrics.metrics import TTFBMetricsData, TTSUsageMetricsData
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection
from pipecat.utils.errors import ErrorCategory

from sonic_deploy.client import SageMakerClient
from sonic_deploy.client.errors import InvalidRequestError, ThrottledError
from sonic_deploy.client.pipecat import SonicSageMakerTTSService, error_category
from tests.client.refreshing import Clock, refreshing_session
from tests.pipecat_frames import FrameRecorder, run_worker
from tests.standins.harness import ReferenceServer, ServerFactory
from tests.standins.real_clients import FAST, PACED, TIMEOUT_S, counted, stream_bytes, wait_for_stats

pytestmark = pytest.mark.usefixtures("quiet_pipecat")

VOICE = "a0e99841-438c-4a64-b679-ae501e7d6091"


@dataclass
class _Pipeline:
    worker: PipelineWorker
    upstream: FrameRecorder  # before the service: errors
    downstream: FrameRecorder  # after it: audio, text, metrics
    requests: list[str] = field(default_factory=list)  # each sentence's text, as sent (on_tts_request)

    async def send(self, *frames: Frame) -> None:
        for frame in frames:
            await self.worker.queue_frame(frame)

    async def stopped(self, turns: int) -> None:
        """Until `turns` turns have ended (a TTSStoppedFrame each)."""
        await self.downstream.wait_until(lambda: self.downstream.count(TTSStoppedFrame) >= turns)

    def errors(self) -> list[ErrorFrame]:
        return [frame for frame in self.upstream.frames if isinstance(frame, ErrorFrame)]

    def sentences(self) -> list[bytes]:
        """The audio of each sentence spoken: pipecat queues a sentence's TTSTextFrame behind its audio."""
        spoken, audio = [], bytearray()
        for frame in self.downstream.frames:
            if isinstance(frame, TTSAudioRawFrame):
                audio += frame.audio
            elif isinstance(frame, TTSTextFrame):
                spoken.append(bytes(audio))
                audio.clear()
        return spoken


def _run(
    service: SonicSageMakerTTSService,
    script: Callable[[_Pipeline], Awaitable[None]],
    sample_rate: int = 24000,
) -> _Pipeline:
    """[recorder, service, recorder] in a PipelineWorker with metrics on; `script` once it has started,
    then an EndFrame (which waits for the audio still to come)."""

    async def run() -> _Pipeline:
        upstream, downstream = (
            FrameRecorder(FrameDirection.UPSTREAM),
            FrameRecorder(FrameDirection.DOWNSTREAM),
        )
        worker = PipelineWorker(
            Pipeline([upstream, service, downstream]),
            params=PipelineParams(
                audio_out_sample_rate=sample_rate, enable_metrics=True, enable_usage_metrics=True
            ),
            cancel_on_idle_timeout=False,
            enable_rtvi=False,
        )
        pipeline = _Pipeline(worker, upstream, downstream)

        async def _request(service: SonicSageMakerTTSService, context_id: str, text: str) -> None:
            pipeline.requests.append(text)

        service.add_event_handler("on_tts_request", _request)
        await run_worker(worker, lambda: script(pipeline))
        return pipeline

    return asyncio.run(run())


def _service(server: ReferenceServer, **options: Any) -> SonicSageMakerTTSService:
    return SonicSageMakerTTSService(
        endpoint_name="sonic-test", region="us-east-2", endpoint_url=server.base, voice_id=VOICE, **options
    )


def _turn(*tokens: str) -> list[Frame]:
    """An LLM's reply as the LLM service pushes it: start, text tokens, end."""
    return [
        LLMFullResponseStartFrame(),
        *(LLMTextFrame(token) for token in tokens),
        LLMFullResponseEndFrame(),
    ]


@pytest.mark.parametrize(
    ("parts", "pipeline_rate", "sample_rate"),
    [("split", 16000, None), ("packed", 16000, 8000)],
    ids=["split-parts-pipeline-rate", "packed-parts-own-rate"],
)
def test_a_turn_is_one_request_per_sentence_at_the_requested_rate(
    parts: str, pipeline_rate: int, sample_rate: int | None, reference_server: ServerFactory
) -> None:
    server = reference_server(*FAST, "--parts", parts)
    tokens = ["Hello", " there.", " Your table", " is booked for eight.", " Anything", " else?"]

    async def script(pipeline: _Pipeline) -> None:
        await pipeline.send(*_turn(*tokens))
        await pipeline.stopped(1)

    pipeline = _run(_service(server, sample_rate=sample_rate), script, pipeline_rate)
    rate = sample_rate or pipeline_rate
    assert [text.strip() for text in pipeline.requests] == [
        "Hello there.",
        "Your table is booked for eight.",
        "Anything else?",
    ]
    assert [len(audio) for audio in pipeline.sentences()] == [
        stream_bytes(text, rate=rate) for text in pipeline.requests
    ]
    audio = [frame for frame in pipeline.downstream.frames if isinstance(frame, TTSAudioRawFrame)]
    assert {(frame.sample_rate, frame.num_channels) for frame in audio} == {(rate, 1)}
    assert len({frame.context_id for frame in audio}) == 1, "one turn, one audio context"
    assert pipeline.errors() == []


def test_metrics_are_pipecats_own_ttfb_and_usage(reference_server: ServerFactory) -> None:
    """TTFB once per turn (pipecat starts it when a turn's audio context opens; the service stops it at
    the endpoint's first chunk), usage in characters per sentence."""
    server = reference_server(*FAST)
    texts = ["First turn.", "Second turn, a little longer."]

    async def script(pipeline: _Pipeline) -> None:
        for turns, text in enumerate(texts, 1):
            await pipeline.send(TTSSpeakFrame(text))
            await pipeline.stopped(turns)

    service = _service(server)
    pipeline = _run(service, script)
    # One measurement a frame; the worker's opening frame carries a zero of each metric for every
    # processor at once (pipeline/worker.py:1260-1265).
    measured = [f for f in pipeline.downstream.frames if isinstance(f, MetricsFrame) and len(f.data) == 1]
    data = [frame.data[0] for frame in measured]
    ttfb = [item for item in data if isinstance(item, TTFBMetricsData) and item.processor == service.name]
    assert len(ttfb) == len(texts) and all(item.value >= 0 for item in ttfb)
    usage = [item.value for item in data if isinstance(item, TTSUsageMetricsData)]
    assert usage == [len(text) for text in pipeline.requests]


def test_an_interruption_closes_the_stream_and_no_stale_audio_follows(
    reference_server: ServerFactory,
) -> None:
    """Audio in real time, five seconds of it: the InterruptionFrame comes after the first chunk, with
    seconds still to stream. The server sees the stream closed; the EndFrame that follows waits for
    every frame still queued, so anything stale would be recorded before it."""
    server = reference_server(*PACED, "--audio-ms", "5000")
    text = "A long answer that the caller interrupts."

    async def script(pipeline: _Pipeline) -> None:
        await pipeline.send(*_turn(text, " And a second sentence."))
        await pipeline.downstream.wait_until(lambda: pipeline.downstream.count(TTSAudioRawFrame) > 0)
        await pipeline.send(InterruptionFrame())
        await asyncio.to_thread(
            wait_for_stats, server, lambda s: s.get("interrupted") == 1 and s.get("active") == 0
        )

    pipeline = _run(_service(server), script)
    stats = server.stats()
    assert (stats.get("interrupted"), stats.get("completed"), stats["active"]) == (1, None, 0)
    frames = pipeline.downstream.frames
    cut = next(i for i, frame in enumerate(frames) if isinstance(frame, InterruptionFrame))
    spoken = [frame for frame in frames[:cut] if isinstance(frame, TTSAudioRawFrame)]
    assert spoken, "some audio before the interruption"
    assert not any(isinstance(frame, TTSAudioRawFrame) for frame in frames[cut:]), "stale audio"
    assert sum(len(frame.audio) for frame in spoken) < stream_bytes(text, audio_ms=5000)
    assert not any(isinstance(frame, TTSTextFrame) for frame in frames), "the cut sentence stays unsaid"
    assert pipeline.errors() == []


def test_throttled_sentences_are_errors_and_the_service_speaks_once_capacity_frees(
    reference_server: ServerFactory,
) -> None:
    """One stream of capacity, held by another caller: each sentence meanwhile is the model's 429, an
    ErrorFrame of category RATE_LIMIT (pipecat's own, not permanent). Three in a row would reach
    pipecat's default limit of silent contexts (3, then written off); the service stays usable, and
    speaks the next sentence once the other caller lets go. Each throttled turn ends at once: with pipecat's idle timeout set
    far beyond the wait, a turn left open would fail the test instead of stalling it."""
    server = reference_server(*PACED, "--capacity", "1")
    service = _service(server, stop_frame_timeout_s=10 * TIMEOUT_S)
    after = "Back again."

    async def script(pipeline: _Pipeline) -> None:
        async with SageMakerClient("sonic-test", region="us-east-2", endpoint_url=server.base) as other:
            holding = asyncio.Event()

            async def hold() -> None:
                async for _ in other.speak("Another caller's long answer. " * 10, voice=VOICE):
                    holding.set()

            holder = asyncio.create_task(hold())
            await asyncio.wait_for(holding.wait(), TIMEOUT_S)
            for turns in range(1, 4):
                await pipeline.send(TTSSpeakFrame(f"Refused, number {turns}."))
                await pipeline.stopped(turns)
            holder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await holder
        await asyncio.to_thread(wait_for_stats, server, lambda s: s.get("active") == 0)
        await pipeline.send(TTSSpeakFrame(after))
        await pipeline.stopped(4)

    pipeline = _run(service, script)
    throttled = [e for e in pipeline.errors() if e.category == ErrorCategory.RATE_LIMIT]
    assert len(throttled) == 3 and all("model_error_429" in e.error for e in throttled)
    assert len(pipeline.errors()) == 3  # one a refused sentence: not also pipecat's "no audio" error
    assert not any(e.category and e.category.is_permanent for e in pipeline.errors())
    assert service.is_usable
    last = [frame for frame in pipeline.downstream.frames if isinstance(frame, TTSAudioRawFrame)]
    assert sum(len(frame.audio) for frame in last) == stream_bytes(after)
    assert server.stats()["over_capacity"] == 3


def test_a_sentence_the_model_refuses_is_that_sentence_s_error_and_the_call_goes_on(
    reference_server: ServerFactory,
) -> None:
    """The model's 422 for one sentence (the second here) is one ErrorFrame for that sentence; the service
    stays usable and speaks the next (pipecat writes a service off for a permanent category)."""
    server = reference_server(*FAST, "--fault", "status422:2")
    sentences = ["First sentence.", "Refused sentence.", "Third sentence."]

    async def script(pipeline: _Pipeline) -> None:
        for turns, text in enumerate(sentences, start=1):
            await pipeline.send(TTSSpeakFrame(text))
            await pipeline.stopped(turns)

    pipeline = _run(_service(server), script)
    (refused,) = pipeline.errors()
    assert "model_error_422" in refused.error and refused.category == ErrorCategory.APPLICATION
    assert service_audio(pipeline) == stream_bytes(sentences[0]) + stream_bytes(sentences[2])
    assert server.stats()["fault_status422"] == 1


@pytest.mark.parametrize(
    ("error", "category"),
    [
        (InvalidRequestError("model_error_422", "bad text", 422), ErrorCategory.APPLICATION),
        (
            InvalidRequestError("client_error_ValidationError", "Endpoint x not found", 400),
            ErrorCategory.INVALID_REQUEST,
        ),
        (ValueError("voice: empty"), ErrorCategory.INVALID_REQUEST),
        (ThrottledError("model_error_429", "busy", 429), ErrorCategory.RATE_LIMIT),
    ],
    ids=["model-422", "no-such-endpoint", "client-refuses", "throttled"],
)
def test_only_the_model_s_refusal_of_a_sentence_leaves_the_service_usable(
    error: Exception, category: ErrorCategory
) -> None:
    """A 422 is that sentence's; an endpoint that does not exist, or a voice the client refuses, is every
    sentence's: pipecat writes the service off, and a ServiceSwitcher can fail over."""
    assert error_category(error) == category


def service_audio(pipeline: _Pipeline) -> int:
    return sum(len(f.audio) for f in pipeline.downstream.frames if isinstance(f, TTSAudioRawFrame))


def test_the_next_sentence_is_signed_with_refreshed_credentials(reference_server: ServerFactory) -> None:
    server = reference_server(*FAST)
    clock = Clock()
    service = _service(server, session=refreshing_session(clock, ["AKIDFIRST", "AKIDSECOND"]))

    async def script(pipeline: _Pipeline) -> None:
        await pipeline.send(TTSSpeakFrame("Signed with the first key."))
        await pipeline.stopped(1)
        clock.now += datetime.timedelta(minutes=55)
        await pipeline.send(TTSSpeakFrame("Signed with the second key."))
        await pipeline.stopped(2)

    pipeline = _run(service, script)
    assert [len(audio) for audio in pipeline.sentences()] == [stream_bytes(t) for t in pipeline.requests]
    assert counted(server.stats(), "access_key") == {"AKIDFIRST": 1, "AKIDSECOND": 1}


def test_the_service_closes_only_a_client_it_made(reference_server: ServerFactory) -> None:
    server = reference_server(*FAST)
    shared = SageMakerClient("sonic-test", region="us-east-2", endpoint_url=server.base)
    owned, borrowing = _service(server), SonicSageMakerTTSService(client=shared, voice_id=VOICE)
    for service in (owned, borrowing):

        async def script(pipeline: _Pipeline) -> None:
            await pipeline.send(TTSSpeakFrame("Hello."))
            await pipeline.stopped(1)

        assert len(_run(service, script).sentences()) == 1
    # The client's pool of connections: made on first use, dropped by close().
    assert owned._client._session is None, "closed when its pipeline ended"
    assert shared._session is not None, "the caller's to close"
    asyncio.run(shared.close())


def test_a_mistake_in_the_arguments_is_named_with_the_fix() -> None:
    with pytest.raises(ValueError, match=r"no endpoint\. Fix: endpoint_name="):
        SonicSageMakerTTSService(voice_id=VOICE)
    with pytest.raises(ValueError, match=r"16-bit PCM\. Fix"):
        SonicSageMakerTTSService(endpoint_name="e", region="us-east-2", voice_id=VOICE, encoding="pcm_mulaw")
    client = SageMakerClient("sonic-test", region="us-east-2")
    with pytest.raises(ValueError, match="either client= or endpoint_name="):
        SonicSageMakerTTSService(client=client, endpoint_name="other", voice_id=VOICE)


def test_importing_the_client_does_not_import_pipecat() -> None:
    code = "import sys, sonic_deploy.client; print('pipecat' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
