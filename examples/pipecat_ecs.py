"""A pipecat agent's voice on Sonic on the ECS route (Cartesia's self-hosted API): one sentence, spoken
through pipecat's own `CartesiaTTSService` into a WAV file.

Offline, against the local stand-in (two terminals):

    sonic-deploy probe serve --port 8080 --api-key sk_local
    CARTESIA_API_KEY=sk_local python examples/pipecat_ecs.py --api-url ws://127.0.0.1:8080/tts/websocket --out speech.wav

Against your stack, with what `sonic-deploy connect --env NAME --route ecs` prints: `--api-url` is its
output ApiUrl (ws://...:PORT/tts/websocket), `--model` and `--cartesia-version` the deployment's, and the
key in CARTESIA_API_KEY (`--api-key` works too, but shows the key to anyone who lists processes):

    python examples/pipecat_ecs.py --api-url "$API_URL" --model sonic-3 --cartesia-version 2025-04-16 --out speech.wav

Needs sonic-deploy with the extras `pipecat` (pipecat-ai with its Cartesia service) and `probe` (for `probe
serve`): docs/client.md, "Install" (it is not on PyPI). In an agent the service takes the LLM's place in this
pipeline's input and the transport's output takes the writer's:
`Pipeline([transport.input(), stt, user_aggregator, llm, tts, transport.output(), assistant_aggregator])`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import warnings
import wave
from pathlib import Path

from loguru import logger
from pipecat.frames.frames import EndFrame, ErrorFrame, Frame, TTSAudioRawFrame, TTSSpeakFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.cartesia.tts import CartesiaTTSService
from pipecat.workers.runner import WorkerRunner

VOICE_ID = "6ccbfb76-1fc6-48f7-b71d-91ac6298247b"
RATES = (8000, 16000, 22050, 24000, 44100, 48000)


class WavWriter(FrameProcessor):
    """Keeps the audio that reaches it (where a transport would play it)."""

    def __init__(self) -> None:
        super().__init__()
        self.audio = bytearray()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            self.audio += frame.audio
        await self.push_frame(frame, direction)


async def speak(tts: CartesiaTTSService, text: str, rate: int) -> tuple[bytes, list[str]]:
    """The sentence's audio, and the errors the pipeline reported."""
    writer, errors = WavWriter(), []
    worker = PipelineWorker(
        Pipeline([tts, writer]), params=PipelineParams(audio_out_sample_rate=rate), enable_rtvi=False
    )

    async def started(worker: PipelineWorker, frame: Frame) -> None:
        await worker.queue_frames([TTSSpeakFrame(text), EndFrame()])  # EndFrame: once the audio is out

    async def failed(worker: PipelineWorker, frame: ErrorFrame) -> None:
        errors.append(frame.error)
        await worker.cancel()  # the first error says it: pipecat retries a refused socket, reporting each

    worker.add_event_handler("on_pipeline_started", started)
    worker.add_event_handler("on_pipeline_error", failed)
    runner = WorkerRunner()
    await runner.add_workers(worker)
    await runner.run()
    return bytes(writer.audio), errors


def _ws_url(value: str) -> str:
    if not value.startswith(("ws://", "wss://")):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not the API's WebSocket URL. Fix: the stack output ApiUrl, "
            "ws://HOST:PORT/tts/websocket"
        )
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api-url", type=_ws_url, required=True, help="the stack output ApiUrl")
    parser.add_argument(
        "--api-key", default=os.environ.get("CARTESIA_API_KEY"), help="default CARTESIA_API_KEY"
    )
    parser.add_argument(
        "--model", default="sonic-3", help="model_id your API server serves (default sonic-3)"
    )
    parser.add_argument(
        "--cartesia-version",
        help="the API version the deployment accepts (default: the one pipecat pins, 2026-03-01)",
    )
    parser.add_argument("--voice", default=VOICE_ID, help="Sonic voice id")
    parser.add_argument("--sample-rate", type=int, choices=RATES, default=24000)
    parser.add_argument("--text", default="Hello from Sonic on ECS, through pipecat.")
    parser.add_argument("--out", type=Path, default=Path("speech.wav"), help="WAV file to write")
    args = parser.parse_args(argv)
    if not args.api_key:
        parser.error("no API key. Fix: --api-key KEY or CARTESIA_API_KEY")
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    # pipecat deprecates cartesia_version= (it writes its messages for the version it pins): passed only
    # when the deployment wants another, as `sonic-deploy connect` prints it.
    version = {"cartesia_version": args.cartesia_version} if args.cartesia_version else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        tts = CartesiaTTSService(
            api_key=args.api_key,
            url=args.api_url,
            settings=CartesiaTTSService.Settings(model=args.model, voice=args.voice),
            **version,
        )
    audio, errors = asyncio.run(speak(tts, args.text, args.sample_rate))
    if errors or not audio:
        print(f"error: {'; '.join(errors) or 'no audio came back'}", file=sys.stderr)
        return 1
    with wave.open(str(args.out), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)  # pipecat's frames: 16-bit PCM
        out.setframerate(args.sample_rate)
        out.writeframes(audio)
    print(f"wrote {args.out}: {len(audio) // 2 / args.sample_rate:.2f} s at {args.sample_rate} Hz")
    return 0


if __name__ == "__main__":
    sys.exit(main())
