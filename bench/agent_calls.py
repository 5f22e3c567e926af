"""What the agent-path benchmarks share (`agent_adapter.py`, `adapter_cost.py`, `turn_framework.py`): the
process set up the same way, the reference server in another process, a pipecat pipeline on a worker of its
own, and one utterance spoken through a bare client, a pipecat pipeline or a LiveKit TTS, timed the same way
whichever carries it: from the call to its first audio in the caller's hands, and how many seconds of audio
it delivered."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import sys
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from livekit.agents import tts
    from pipecat.pipeline.worker import PipelineParams, PipelineWorker
    from pipecat.processors.frame_processor import FrameProcessor
    from pipecat.services.tts_service import TTSService

    from sonic_deploy.client import AudioChunk

VOICE = "a0e99841-438c-4a64-b679-ae501e7d6091"
TEXT = "Your table for two is booked for eight tonight."
RATE = 24000
SAMPLE_BYTES = 2  # pcm_s16le, mono: what both frameworks' frames carry
CALL_TIMEOUT_S = 30.0  # a call that never ends is a broken run, not a slow one


def prepare(pin: bool) -> int | None:
    """This process as the benchmarks run it; the CPU for the server (0 with `pin`, this process on 1).
    The frameworks log at WARNING: pipecat logs every frame at DEBUG (loguru, to stderr), on the loop being
    measured, and an agent in production logs at INFO or above. AWS credentials, where none are set, are
    stand-ins: the reference server checks no signature."""
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    logging.getLogger("livekit").setLevel(logging.WARNING)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    if not pin:
        return None
    os.sched_setaffinity(0, {1})
    return 0


def start_server(cpu: int | None, *options: str) -> tuple[subprocess.Popen[str], str]:
    """`probe serve` on a free port with `options`, in another process (on CPU `cpu` when given); its
    `http://HOST:PORT`."""
    command = [
        sys.executable, "-m", "sonic_deploy.cli", "probe", "serve", "--port", "0", "--exit-after", "3600",
        *options,
    ]  # fmt: skip
    preexec = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, preexec_fn=preexec)
    assert server.stdout is not None
    line = server.stdout.readline()
    if not line.startswith("listening on "):
        raise SystemExit(f"reference server did not start: {line!r}")
    return server, line.split("listening on ")[1].strip()


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


@dataclass(frozen=True)
class Spoken:
    """One utterance as its caller received it."""

    first_s: float  # from the call to its first audio in the caller's hands
    audio_s: float  # the audio it delivered, in seconds at its sample rate


Speak = Callable[[], Awaitable[Spoken]]
Close = Callable[[], Awaitable[None]]


class Clock:
    """One utterance's first audio and length, stamped as its audio arrives; started when made."""

    def __init__(self) -> None:
        self.began = time.perf_counter()
        self.first: float | None = None
        self.audio_s = 0.0

    def heard(self, seconds: float) -> None:
        if seconds > 0 and self.first is None:
            self.first = time.perf_counter()
        self.audio_s += seconds

    def spoken(self) -> Spoken:
        if self.first is None:
            raise SystemExit("an utterance ended with no audio: the run is broken (see the log above)")
        return Spoken(self.first - self.began, self.audio_s)


async def client_call(chunks: AsyncGenerator[AudioChunk]) -> Spoken:
    """A bare client's `speak(...)`, not yet started (a generator runs from its first step)."""
    clock = Clock()
    async with contextlib.aclosing(chunks):
        async for chunk in chunks:
            clock.heard(len(chunk.data) / (SAMPLE_BYTES * RATE))
    return clock.spoken()


async def livekit_synthesize_call(engine: tts.TTS[Any], text: str) -> Spoken:
    """`synthesize(text)`: one request, its audio through LiveKit's `AudioEmitter`."""
    clock = Clock()
    async with engine.synthesize(text) as stream:
        async for event in stream:
            clock.heard(event.frame.duration)
    return clock.spoken()


async def livekit_stream_call(engine: tts.TTS[Any], text: str) -> Spoken:
    """`stream()` as an AgentSession uses it: the text pushed in and the input ended (LiveKit's sentence
    tokenizer holds the last sentence until then), its audio through LiveKit's `AudioEmitter`."""
    clock = Clock()
    async with engine.stream() as stream:
        stream.push_text(text)
        stream.end_input()
        async for event in stream:
            clock.heard(event.frame.duration)
    return clock.spoken()


async def start_worker(
    processors: list[FrameProcessor], params: PipelineParams
) -> tuple[PipelineWorker, asyncio.Task[None]]:
    """`processors` as a pipecat pipeline on a worker of its own, once started: the worker and the task that
    runs it (queue an `EndFrame`, then await the task, to end it)."""
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineWorker
    from pipecat.workers.runner import WorkerRunner

    worker = PipelineWorker(
        Pipeline(processors),
        params=params,
        idle_timeout_secs=None,  # no transport here, so no frames that would say the call is alive
        enable_rtvi=False,
    )
    started = asyncio.Event()

    async def _started(*_: object) -> None:
        started.set()

    worker.add_event_handler("on_pipeline_started", _started)
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    running = asyncio.create_task(runner.run())
    await started.wait()
    return worker, running


async def pipecat_call(service: TTSService, text: str) -> tuple[Speak, Close]:
    """`service` in a real pipecat pipeline, `[before, service, after]`, on a worker of its own: a call
    runs from `before` passing a `TTSSpeakFrame` on to `after` receiving the first `TTSAudioRawFrame`
    (pipecat's machinery in between counts: the service's input queue, its aggregator, its audio
    context), and ends when `after` receives the `TTSStoppedFrame`."""
    from pipecat.frames.frames import EndFrame, Frame, TTSAudioRawFrame, TTSSpeakFrame, TTSStoppedFrame
    from pipecat.pipeline.worker import PipelineParams
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

    clocks: list[Clock] = []
    ended = asyncio.Event()

    class Before(FrameProcessor):
        async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, TTSSpeakFrame):
                clocks.append(Clock())
            await self.push_frame(frame, direction)

    class After(FrameProcessor):
        async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, TTSAudioRawFrame):
                clocks[-1].heard(len(frame.audio) / (SAMPLE_BYTES * frame.num_channels * frame.sample_rate))
            elif isinstance(frame, TTSStoppedFrame):
                ended.set()
            await self.push_frame(frame, direction)

    worker, running = await start_worker(
        [Before(), service, After()], PipelineParams(audio_out_sample_rate=RATE)
    )

    async def speak() -> Spoken:
        clocks.clear()
        ended.clear()
        await worker.queue_frame(TTSSpeakFrame(text))
        try:
            async with asyncio.timeout(CALL_TIMEOUT_S):
                await ended.wait()
        except TimeoutError:
            raise SystemExit(
                f"a pipecat call did not end in {CALL_TIMEOUT_S:g} s (see the log above)"
            ) from None
        return clocks[-1].spoken()

    async def close() -> None:
        await worker.queue_frame(EndFrame())
        await running

    return speak, close
