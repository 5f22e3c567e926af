"""LiveKit Agents' TTS on the SageMaker route: `SonicSageMakerTTS` speaks a sentence into a WAV file.

Offline, with no LiveKit room and no AWS account (`probe serve` speaks the SageMaker protocol and checks
no signature, so any credentials do):

    sonic-deploy probe serve --port 8080
    AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x python examples/livekit_sagemaker.py \\
        --endpoint sonic-dev --region us-east-2 --endpoint-url http://127.0.0.1:8080 --out speech.wav

`--telemetry FILE` appends the line per utterance the agent would publish (docs/client.md, "Telemetry");
`python -m sonic_deploy.dashboard_render` draws them in the agent row. Against a deployed endpoint, leave out
--endpoint-url: --endpoint is the stack output EndpointName, and
the credentials are boto3's (AWS_PROFILE, a task or instance role). In an agent, the same TTS goes to
`AgentSession(tts=...)`, which calls `stream()` as this does: one request per sentence.

Needs sonic-deploy with the extras `livekit` (the TTS) and `probe` (for `probe serve`): docs/client.md,
"Install" (it is not on PyPI).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from pathlib import Path

from livekit import rtc
from livekit.agents import APIError

from sonic_deploy.arguments import output_file
from sonic_deploy.client.livekit import SonicSageMakerTTS
from sonic_deploy.client.telemetry import appending_to

# A Cartesia voice id (the probe's default); any id does against `probe serve`.
VOICE_ID = "6ccbfb76-1fc6-48f7-b71d-91ac6298247b"


async def speak(tts: SonicSageMakerTTS, text: str) -> rtc.AudioFrame:
    async with tts, tts.stream() as stream:
        stream.push_text(text)  # an agent pushes the LLM's tokens as they come
        stream.end_input()
        return rtc.combine_audio_frames([event.frame async for event in stream])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--endpoint", required=True, help="the SageMaker endpoint's name (EndpointName)")
    parser.add_argument("--region", help="the endpoint's Region (default: boto3's)")
    parser.add_argument("--endpoint-url", help="another runtime URL: a VPC endpoint, or `probe serve`")
    parser.add_argument("--voice", default=VOICE_ID)
    parser.add_argument("--sample-rate", type=int, default=24000)
    parser.add_argument("--text", default="Hello from Sonic on SageMaker, spoken through LiveKit Agents.")
    parser.add_argument("--out", type=Path, required=True, help="the WAV file to write")
    parser.add_argument(
        "--telemetry", type=output_file("the telemetry lines"), help="append the telemetry lines to this file"
    )
    parser.add_argument(
        "--env", default="dev", help="the stacks' environment, for the telemetry (default dev)"
    )
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as files:
        telemetry = None
        if args.telemetry is not None:
            telemetry = files.enter_context(
                appending_to(args.telemetry, "sagemaker", environment=args.env, endpoint=args.endpoint)
            )
        try:
            tts = SonicSageMakerTTS(
                endpoint_name=args.endpoint,
                region=args.region,
                endpoint_url=args.endpoint_url,
                voice=args.voice,
                sample_rate=args.sample_rate,
                telemetry=telemetry,
            )
        except ValueError as error:  # no Region, a bad voice id or sample rate: named, with the fix
            parser.error(str(error))
        try:
            audio = asyncio.run(speak(tts, args.text))
        except APIError as error:  # refused, throttled, no credentials...: the client's own words
            parser.exit(1, f"{parser.prog}: {error.message}\n")
    try:
        args.out.write_bytes(audio.to_wav_bytes())
    except OSError as error:
        parser.exit(1, f"{parser.prog}: cannot write {args.out}: {error.strerror}\n")
    print(f"wrote {args.out}: {audio.duration:.2f} s at {audio.sample_rate} Hz")


if __name__ == "__main__":
    main()
