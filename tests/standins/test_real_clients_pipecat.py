"""pipecat 1.14's own Cartesia services (pinned in pyproject.toml), unmodified, in a real pipecat pipeline
against `probe serve`: frames go in at the pipeline's source, and what the service pushes is recorded on
both sides of it (audio and its end downstream, errors upstream).

`CartesiaTTSService` opens one WebSocket when the pipeline starts (`X-API-Key`, `Cartesia-Version:
2026-03-01`) and speaks each LLM turn as one context, a sentence per message (`max_buffer_delay_ms: 0`),
closed by an empty `continue: false`; an interruption cancels the context. `CartesiaHttpTTSService` posts
each utterance to /tts/bytes and pushes the whole body as one audio frame."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest
from pipecat.frames.frames import (
    ErrorFrame,
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.cartesia.tts import CartesiaHttpTTSService, CartesiaTTSService
from pipecat.services.tts_service import TTSService

from tests.pipecat_frames import FrameRecorder, run_worker

from .harness import ReferenceServer, ServerFactory
from .real_clients import FAST, KEY, PACED, counted, stream_bytes, wait_for_stats

pytestmark = pytest.mark.usefixtures("quiet_pipecat")

MODEL = "sonic-3"
VOICE = "a0e99841-438c-4a64-b679-ae501e7d6091"


@dataclass
class _Pipeline:
    worker: PipelineWorker
    upstream: FrameRecorder  # before the service: what it pushes upstream (errors)
    downstream: FrameRecorder  # after it: audio, TTSStoppedFrame, text

    async def send(self, *frames: Frame) -> None:
        for frame in frames:
            await self.worker.queue_frame(frame)

    def audio(self) -> list[TTSAudioRawFrame]:
        return [frame for frame in self.downstream.frames if isinstance(frame, TTSAudioRawFrame)]

    def errors(self) -> list[str]:
        return [frame.error for frame in self.upstream.frames if isinstance(frame, ErrorFrame)]


def _run(
    service: TTSService,
    script: Callable[[_Pipeline], Awaitable[None]],
    sample_rate: int,
    cancel: bool = False,
) -> _Pipeline:
    """Run [recorder, service, recorder] in a PipelineWorker, `script` once it has started; then end it
    with an EndFrame (which waits for the audio still to come), or cancel it."""

    async def run() -> _Pipeline:
        upstream, downstream = (
            FrameRecorder(FrameDirection.UPSTREAM),
            FrameRecorder(FrameDirection.DOWNSTREAM),
        )
        worker = PipelineWorker(
            Pipeline([upstream, service, downstream]),
            params=PipelineParams(audio_out_sample_rate=sample_rate),
            cancel_on_idle_timeout=False,
        )
        pipeline = _Pipeline(worker, upstream, downstream)
        await run_worker(worker, lambda: script(pipeline), cancel=cancel)
        return pipeline

    return asyncio.run(run())


def _websocket_service(server: ReferenceServer, sample_rate: int) -> CartesiaTTSService:
    return CartesiaTTSService(
        api_key=KEY,
        url=server.ws_url,
        sample_rate=sample_rate,
        settings=CartesiaTTSService.Settings(voice=VOICE, model=MODEL),
    )


def _turn(*texts: str) -> list[Frame]:
    """An LLM's reply as the LLM service pushes it: start, text tokens, end."""
    return [LLMFullResponseStartFrame(), *(LLMTextFrame(text) for text in texts), LLMFullResponseEndFrame()]


def test_a_turn_of_several_sentences_is_one_context(reference_server: ServerFactory) -> None:
    server = reference_server(*FAST)
    rate = 16000
    tokens = ["Hello there. ", "How are you today? ", "Fine"]

    async def script(pipeline: _Pipeline) -> None:
        await pipeline.send(*_turn(*tokens))
        await pipeline.downstream.wait_for(TTSStoppedFrame)

    pipeline = _run(_websocket_service(server, rate), script, rate)
    audio = pipeline.audio()
    assert audio and {(frame.sample_rate, frame.num_channels) for frame in audio} == {(rate, 1)}
    assert len({frame.context_id for frame in audio}) == 1
    # pipecat sends each sentence as its own message (trimmed); with max_buffer_delay_ms 0 the server
    # speaks each as it comes.
    spoken = [token.strip() for token in tokens]
    assert sum(len(frame.audio) for frame in audio) == sum(stream_bytes(text, rate=rate) for text in spoken)
    assert len(pipeline.downstream.of(TTSStoppedFrame)) == 1
    # The word timestamps it asked for come back as the words it spoke.
    words = [frame.text for frame in pipeline.downstream.of(TTSTextFrame) if isinstance(frame, TTSTextFrame)]
    assert words == " ".join(spoken).split()
    assert pipeline.errors() == []
    stats = wait_for_stats(server, lambda s: s["active"] == 0)
    assert stats["admitted"] == 1 and stats["completed"] == 1 and "interrupted" not in stats
    assert counted(stats, "version") == {"2026-03-01": 1}
    assert counted(stats, "auth") == {"x-api-key": 1}
    assert counted(stats, "model") == {MODEL: 1}, "the model of its settings, once for the one context"


def test_an_interruption_cancels_the_context(reference_server: ServerFactory) -> None:
    """An InterruptionFrame mid-utterance (audio in real time: seconds of it still to come) makes the
    service send `cancel` for its context; the server stops it and counts it."""
    server = reference_server(*PACED)
    rate = 24000

    async def script(pipeline: _Pipeline) -> None:
        await pipeline.send(
            LLMFullResponseStartFrame(),
            LLMTextFrame("Hello there, this sentence has seconds of audio. "),
            LLMTextFrame("And it has a second one. "),
        )
        await pipeline.downstream.wait_for(TTSAudioRawFrame)
        await pipeline.send(InterruptionFrame())
        await asyncio.to_thread(wait_for_stats, server, lambda s: s.get("cancelled", 0) >= 1)

    pipeline = _run(_websocket_service(server, rate), script, rate)
    stats = wait_for_stats(server, lambda s: s["active"] == 0)
    assert stats["cancelled"] == 1 and stats["admitted"] == 1
    assert stats["interrupted"] == 1 and "completed" not in stats and stats["active"] == 0
    assert pipeline.errors() == []
    assert pipeline.downstream.of(TTSStoppedFrame) == [], "pipecat dropped the context: it ended nowhere"


def test_over_capacity_is_an_error_frame(reference_server: ServerFactory) -> None:
    """`--capacity 0` refuses every stream: the service pushes an ErrorFrame carrying the server's 429
    error for that context, and no audio. The pipeline is then cancelled, not ended: pipecat keeps a
    context the server refused open until a `done` that never comes (3 s, its stop_frame_timeout_s).

    pipecat sends each utterance's text, then at once the empty `continue: false` that closes it. A
    second utterance marks when the server has answered all of the first: it reads a socket's messages
    in order, so every answer about the first is out before the first answer about the second."""
    server = reference_server(*FAST, "--capacity", "0")
    rate = 24000

    async def script(pipeline: _Pipeline) -> None:
        await pipeline.send(TTSSpeakFrame("No room for this."))
        await pipeline.upstream.wait_for(ErrorFrame)
        await pipeline.send(TTSSpeakFrame("Nor for this."))
        await pipeline.upstream.wait_until(lambda: len(_contexts(pipeline.errors())) == 2)

    pipeline = _run(_websocket_service(server, rate), script, rate, cancel=True)
    errors = pipeline.errors()
    assert all("'status_code': 429" in error for error in errors)
    assert pipeline.audio() == []
    first = _contexts(errors)[0]
    about_first = [error for error in errors if f"'context_id': '{first}'" in error]
    # pipecat sends the text and the closing message back to back: the closing message belongs to the
    # refused context (one ErrorFrame, one refusal), not to a new stream refused again.
    assert len(about_first) == 1, f"one refused utterance, {len(about_first)} errors: {about_first}"
    assert server.stats()["over_capacity"] == 2, "one refusal per utterance"


def _contexts(errors: list[str]) -> list[str]:
    """The context ids the errors name, in order of first appearance."""
    found = [
        error.split("'context_id': '", 1)[1].split("'", 1)[0]
        for error in errors
        if "'context_id': '" in error
    ]
    return list(dict.fromkeys(found))


def test_http_service(reference_server: ServerFactory) -> None:
    server = reference_server(*FAST)
    rate = 22050
    text = "Hello over HTTP."
    service = CartesiaHttpTTSService(
        api_key=KEY,
        base_url=server.base,
        sample_rate=rate,
        settings=CartesiaHttpTTSService.Settings(voice=VOICE, model=MODEL),
    )

    async def script(pipeline: _Pipeline) -> None:
        await pipeline.send(TTSSpeakFrame(text))
        await pipeline.downstream.wait_for(TTSStoppedFrame)

    pipeline = _run(service, script, rate)
    audio = pipeline.audio()
    assert len(audio) == 1, "the whole body, as one frame"
    assert (audio[0].sample_rate, audio[0].num_channels) == (rate, 1)
    assert len(audio[0].audio) == stream_bytes(text, rate=rate)
    assert pipeline.errors() == []
    stats = wait_for_stats(server, lambda s: s["active"] == 0)
    assert stats["admitted"] == 1 and stats["completed"] == 1
    assert counted(stats, "version") == {"2026-03-01": 1}
    assert counted(stats, "auth") == {"x-api-key": 1}


@pytest.mark.parametrize(
    ("options", "status"), [(("--capacity", "0"), 429), (("--fault", "status422:1"), 422)]
)
def test_http_service_error_is_an_error_frame(
    reference_server: ServerFactory, options: tuple[str, ...], status: int
) -> None:
    server = reference_server(*FAST, *options)
    service = CartesiaHttpTTSService(
        api_key=KEY, base_url=server.base, settings=CartesiaHttpTTSService.Settings(voice=VOICE, model=MODEL)
    )

    async def script(pipeline: _Pipeline) -> None:
        await pipeline.send(TTSSpeakFrame("Refused."))
        await pipeline.upstream.wait_for(ErrorFrame)

    # Cancelled, not ended: after an error the service waits 3 s for audio that never comes (above).
    pipeline = _run(service, script, 24000, cancel=True)
    errors = pipeline.errors()
    assert len(errors) == 1 and f"Cartesia API error (status {status})" in errors[0]
    assert pipeline.audio() == []
