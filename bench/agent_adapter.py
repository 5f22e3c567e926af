"""Benchmark: what the framework services add to time to first audio, against the bare client, in one run.

One reference server (another process: SageMaker protocol, fixed first-byte delay, 20 ms chunks at half
real time) answers four callers in turn, round after round, so that whatever else the machine does
falls on all four alike:

- `bare`: `SageMakerClient.speak()`, from the call to the first chunk in the caller's hands;
- `pipecat`: `SonicSageMakerTTSService` in a real pipecat pipeline, from the moment a processor just
  upstream of the service passes it a `TTSSpeakFrame` to the moment a processor just downstream receives
  the first `TTSAudioRawFrame` (pipecat's own machinery in between counts: the service's input queue, its
  aggregator, its audio context);
- `livekit`: `SonicSageMakerTTS.synthesize()` in LiveKit Agents, from the call to the first
  `SynthesizedAudio` out of the stream (LiveKit's `AudioEmitter` in between counts);
- `lk-stream`: `SonicSageMakerTTS.stream()`, as an AgentSession uses it: the text pushed in, cut into
  sentences by LiveKit's tokenizer (the sentence ends the text: the tokenizer holds it until end_input),
  from the push to the first `SynthesizedAudio`.

pipecat's log is set to WARNING (it logs each frame at DEBUG by default, on the loop being measured).
It prints each caller's TTFA percentiles and the services' differences from `bare` at the median and p99,
against the goal (at most 1 ms at the median, 3 ms at p99). A measurement, not a test: nothing here passes
or fails CI.

    .venv/bin/python bench/agent_adapter.py [--rounds 300] [--warmup 20] [--pin]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

GOAL_P50_MS, GOAL_P99_MS = 1.0, 3.0
VOICE = "a0e99841-438c-4a64-b679-ae501e7d6091"
TEXT = "Your table for two is booked for eight tonight."
RATE = 24000


def start_server(first_byte_ms: float, cpu: int | None) -> tuple[subprocess.Popen[str], str]:
    command = [
        sys.executable, "-m", "sonic_deploy.cli", "probe", "serve", "--port", "0", "--exit-after", "3600",
        "--first-byte-ms", str(first_byte_ms), "--jitter-ms", "0", "--chunk-ms", "20", "--pace", "0.5",
        "--audio-ms", "400",
    ]  # fmt: skip
    preexec = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, preexec_fn=preexec)
    assert server.stdout is not None
    line = server.stdout.readline()
    if not line.startswith("listening on "):
        raise SystemExit(f"reference server did not start: {line!r}")
    return server, line.split("listening on ")[1].strip()


Measure = Callable[[], Awaitable[float]]


async def bare_caller(base: str) -> tuple[Measure, Callable[[], Awaitable[None]]]:
    from sonic_deploy.client import SageMakerClient

    client = SageMakerClient("bench", region="us-east-2", endpoint_url=base)

    async def measure() -> float:
        began = time.perf_counter()
        first: float | None = None
        async with contextlib.aclosing(client.speak(TEXT, voice=VOICE, sample_rate=RATE)) as audio:
            async for _ in audio:
                first = first or time.perf_counter()
        assert first is not None
        return first - began

    return measure, client.close


async def pipecat_caller(base: str) -> tuple[Measure, Callable[[], Awaitable[None]]]:
    from pipecat.frames.frames import EndFrame, Frame, TTSAudioRawFrame, TTSSpeakFrame, TTSStoppedFrame
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineParams, PipelineWorker
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
    from pipecat.workers.runner import WorkerRunner

    from sonic_deploy.client.pipecat import SonicSageMakerTTSService

    moments: dict[str, float] = {}
    spoken = asyncio.Event()

    class Before(FrameProcessor):
        async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, TTSSpeakFrame):
                moments["began"] = time.perf_counter()
            await self.push_frame(frame, direction)

    class After(FrameProcessor):
        async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, TTSAudioRawFrame) and "first" not in moments:
                moments["first"] = time.perf_counter()
            elif isinstance(frame, TTSStoppedFrame):
                spoken.set()
            await self.push_frame(frame, direction)

    service = SonicSageMakerTTSService(
        endpoint_name="bench", region="us-east-2", endpoint_url=base, voice_id=VOICE, sample_rate=RATE
    )
    worker = PipelineWorker(
        Pipeline([Before(), service, After()]),
        params=PipelineParams(audio_out_sample_rate=RATE),
        idle_timeout_secs=None,  # no transport here, so no frames that would say the call is alive
        enable_rtvi=False,
    )
    started = asyncio.Event()

    async def _started(*_: Any) -> None:
        started.set()

    worker.add_event_handler("on_pipeline_started", _started)

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    running = asyncio.create_task(runner.run())
    await started.wait()

    async def measure() -> float:
        moments.clear()
        spoken.clear()
        await worker.queue_frame(TTSSpeakFrame(TEXT))
        await spoken.wait()
        return moments["first"] - moments["began"]

    async def close() -> None:
        await worker.queue_frame(EndFrame())
        await running

    return measure, close


async def livekit_caller(base: str) -> tuple[Measure, Callable[[], Awaitable[None]]]:
    from sonic_deploy.client.livekit import SonicSageMakerTTS

    tts = SonicSageMakerTTS(
        endpoint_name="bench", region="us-east-2", endpoint_url=base, voice=VOICE, sample_rate=RATE
    )

    async def measure() -> float:
        began = time.perf_counter()
        first: float | None = None
        async with tts.synthesize(TEXT) as stream:
            async for _ in stream:
                first = first or time.perf_counter()
        assert first is not None
        return first - began

    return measure, tts.aclose


async def livekit_stream_caller(base: str) -> tuple[Measure, Callable[[], Awaitable[None]]]:
    """What an AgentSession does with a streaming TTS: the LLM's text pushed into `stream()`, cut into
    sentences by LiveKit's tokenizer, one request per sentence."""
    from sonic_deploy.client.livekit import SonicSageMakerTTS

    tts = SonicSageMakerTTS(
        endpoint_name="bench", region="us-east-2", endpoint_url=base, voice=VOICE, sample_rate=RATE
    )

    async def measure() -> float:
        began = time.perf_counter()
        first: float | None = None
        async with tts.stream() as stream:
            stream.push_text(TEXT)
            stream.end_input()
            async for _ in stream:
                first = first or time.perf_counter()
        assert first is not None
        return first - began

    return measure, tts.aclose


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def run(base: str, rounds: int, warmup: int) -> dict[str, list[float]]:
    callers = {
        "bare": await bare_caller(base),
        "pipecat": await pipecat_caller(base),
        "livekit": await livekit_caller(base),
        "lk-stream": await livekit_stream_caller(base),
    }
    figures: dict[str, list[float]] = {name: [] for name in callers}
    try:
        for index in range(warmup + rounds):
            order = list(callers)
            shift = index % len(order)  # each caller first in turn
            for name in order[shift:] + order[:shift]:
                seconds = await callers[name][0]()
                if index >= warmup:
                    figures[name].append(seconds * 1000)
    finally:
        for _, close in callers.values():
            await close()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--first-byte-ms", type=float, default=50.0)
    parser.add_argument("--pin", action="store_true", help="server on CPU 0, this process on CPU 1")
    args = parser.parse_args()
    # pipecat logs every frame at DEBUG (loguru, to stderr), on the event loop being measured: an agent in
    # production logs at INFO or above, and so does this run.
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    if args.pin:
        os.sched_setaffinity(0, {1})
    server, base = start_server(args.first_byte_ms, 0 if args.pin else None)
    try:
        figures = asyncio.run(run(base, args.rounds, args.warmup))
    finally:
        server.kill()
    print(f"# TTFA in ms over {args.rounds} rounds (after {args.warmup} warm-up), server first byte "
          f"{args.first_byte_ms:g} ms; each round: one utterance per caller, in turn")  # fmt: skip
    print(
        f"{'caller':>9} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8} {'+p50':>7} {'+p99':>7}  goal (+p50<=1, +p99<=3)"
    )
    base_p50, base_p99 = (percentile(figures["bare"], q) for q in (0.5, 0.99))
    for name, values in figures.items():
        p50, p90, p99 = (percentile(values, q) for q in (0.5, 0.9, 0.99))
        row = f"{name:>9} {p50:8.2f} {p90:8.2f} {p99:8.2f} {max(values):8.2f}"
        if name == "bare":
            print(row)
            continue
        added_p50, added_p99 = p50 - base_p50, p99 - base_p99
        met = added_p50 <= GOAL_P50_MS and added_p99 <= GOAL_P99_MS
        print(f"{row} {added_p50:7.2f} {added_p99:7.2f}  {'met' if met else 'NOT met'}")
    print(f"# bare mean {statistics.fmean(figures['bare']):.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
