"""A pipecat agent's voice on Sonic on a SageMaker endpoint (the Marketplace route): one sentence, spoken
through sonic_deploy's `SonicSageMakerTTSService` into a WAV file.

Offline, against the local stand-in (two terminals; any credentials sign for it):

    sonic-deploy probe serve --port 8080
    AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x python examples/pipecat_sagemaker.py \
        --endpoint-url http://127.0.0.1:8080 --region us-east-1 --out speech.wav

`--telemetry FILE` appends what the agent would publish (docs/client.md, "Telemetry"): a line per utterance
and a line per hop pipecat measured; `python -m sonic_deploy.dashboard_render` draws them in the agent row.

Against your endpoint (the stack output EndpointName; credentials from boto3's chain, e.g. AWS_PROFILE):

    python examples/pipecat_sagemaker.py --endpoint sonic-dev --region us-east-2 --out speech.wav

Needs sonic-deploy with the extras `pipecat` (the service) and `probe` (for `probe serve`): docs/client.md,
"Install" (it is not on PyPI). In an agent the service takes the LLM's place in this pipeline's input and the
transport's output takes the writer's:
`Pipeline([transport.input(), stt, user_aggregator, llm, tts, transport.output(), assistant_aggregator])`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import wave
from pathlib import Path

from loguru import logger
from pipecat.frames.frames import EndFrame, ErrorFrame, Frame, TTSAudioRawFrame, TTSSpeakFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.workers.runner import WorkerRunner

from sonic_deploy.arguments import output_file
from sonic_deploy.client.pipecat import SonicSageMakerTTSService, TelemetryObserver
from sonic_deploy.client.telemetry import Telemetry, appending_to

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


async def speak(
    tts: SonicSageMakerTTSService, text: str, rate: int, telemetry: Telemetry | None
) -> tuple[bytes, list[str]]:
    """The sentence's audio, and the errors the pipeline reported."""
    writer, errors = WavWriter(), []
    worker = PipelineWorker(
        Pipeline([tts, writer]),
        params=PipelineParams(audio_out_sample_rate=rate, enable_metrics=telemetry is not None),
        observers=[TelemetryObserver(telemetry)] if telemetry is not None else None,
        enable_rtvi=False,
    )

    async def started(worker: PipelineWorker, frame: Frame) -> None:
        await worker.queue_frames([TTSSpeakFrame(text), EndFrame()])  # EndFrame: once the audio is out

    async def failed(worker: PipelineWorker, frame: ErrorFrame) -> None:
        errors.append(frame.error)

    worker.add_event_handler("on_pipeline_started", started)
    worker.add_event_handler("on_pipeline_error", failed)
    runner = WorkerRunner()
    await runner.add_workers(worker)
    await runner.run()
    return bytes(writer.audio), errors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", default="sonic-dev", help="SageMaker endpoint name (default sonic-dev)")
    parser.add_argument("--region", help="the endpoint's Region (default: AWS_REGION / the profile's)")
    parser.add_argument(
        "--endpoint-url", help="another runtime URL, e.g. http://127.0.0.1:8080 (probe serve)"
    )
    parser.add_argument("--voice", default=VOICE_ID, help="Sonic voice id")
    parser.add_argument("--sample-rate", type=int, choices=RATES, default=24000)
    parser.add_argument("--text", default="Hello from Sonic on SageMaker, through pipecat.")
    parser.add_argument("--out", type=Path, default=Path("speech.wav"), help="WAV file to write")
    parser.add_argument(
        "--telemetry", type=output_file("the telemetry lines"), help="append the telemetry lines to this file"
    )
    parser.add_argument(
        "--env", default="dev", help="the stacks' environment, for the telemetry (default dev)"
    )
    args = parser.parse_args(argv)
    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    with contextlib.ExitStack() as files:
        telemetry = None
        if args.telemetry is not None:
            telemetry = files.enter_context(
                appending_to(args.telemetry, "sagemaker", environment=args.env, endpoint=args.endpoint)
            )
        try:
            tts = SonicSageMakerTTSService(
                endpoint_name=args.endpoint,
                region=args.region,
                endpoint_url=args.endpoint_url,
                voice_id=args.voice,
                telemetry=telemetry,
            )
        except ValueError as error:  # no Region, an empty name: the message says what to do
            parser.error(str(error))
        audio, errors = asyncio.run(speak(tts, args.text, args.sample_rate, telemetry))
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
