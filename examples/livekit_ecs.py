"""LiveKit Agents' TTS on the ECS route: LiveKit's own Cartesia plugin speaks a sentence into a WAV file.

The ECS stack serves the Cartesia API itself, so no adapter is needed: `cartesia.TTS(base_url=...)` with
the http(s) base of the stack output ApiUrl (`ws://HOST:PORT/tts/websocket` -> `http://HOST:PORT`; the
plugin turns it back into the WebSocket URL). Offline, with no LiveKit room:

    sonic-deploy probe serve --port 8080
    CARTESIA_API_KEY=anything python examples/livekit_ecs.py --api-url ws://127.0.0.1:8080/tts/websocket --out speech.wav

Against a deployed stack: --api-url is the output ApiUrl and the key is Cartesia's (default
$CARTESIA_API_KEY). In an agent, the same TTS goes to `AgentSession(tts=...)`, inside a job, where the
plugin uses LiveKit's own HTTP session (here it is given one).

Needs sonic-deploy with the extras `livekit` (livekit-agents with its Cartesia plugin) and `probe` (for `probe
serve`): docs/client.md, "Install" (it is not on PyPI).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import urllib.parse
from pathlib import Path

import aiohttp
from livekit import rtc
from livekit.agents import APIError
from livekit.plugins import cartesia

# A Cartesia voice id (the probe's default); any id does against `probe serve`.
VOICE_ID = "6ccbfb76-1fc6-48f7-b71d-91ac6298247b"


def http_base(api_url: str) -> str:
    """`ws://HOST:PORT/tts/websocket` (the stack output ApiUrl) -> `http://HOST:PORT`; ValueError if not."""
    parts = urllib.parse.urlsplit(api_url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme)
    if scheme is None or not parts.netloc or parts.path.rstrip("/") != "/tts/websocket":
        raise ValueError(
            f"--api-url {api_url!r} is not a Cartesia WebSocket URL. "
            "Fix: the ECS stack output ApiUrl, ws://HOST:PORT/tts/websocket"
        )
    return f"{scheme}://{parts.netloc}"


async def speak(
    base_url: str, api_key: str, model: str, version: str, voice: str, text: str
) -> rtc.AudioFrame:
    async with aiohttp.ClientSession() as session:
        tts = cartesia.TTS(
            base_url=base_url,
            api_key=api_key,
            model=model,
            api_version=version,
            voice=voice,
            http_session=session,
        )
        async with tts, tts.stream() as stream:
            stream.push_text(text)  # an agent pushes the LLM's tokens as they come
            stream.end_input()
            return rtc.combine_audio_frames([event.frame async for event in stream])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--api-url", required=True, help="the ECS stack output ApiUrl")
    parser.add_argument(
        "--api-key", default=os.environ.get("CARTESIA_API_KEY"), help="(default: $CARTESIA_API_KEY)"
    )
    parser.add_argument("--model", default="sonic-3", help="the model_id your self-hosted Sonic serves")
    parser.add_argument(
        "--cartesia-version", default="2025-04-16", help="the API version the deployment accepts"
    )
    parser.add_argument("--voice", default=VOICE_ID)
    parser.add_argument("--text", default="Hello from Sonic on ECS, spoken through LiveKit Agents.")
    parser.add_argument("--out", type=Path, required=True, help="the WAV file to write")
    args = parser.parse_args(argv)
    if not args.api_key:
        parser.error("no API key. Fix: --api-key, or set CARTESIA_API_KEY")
    try:
        base_url = http_base(args.api_url)
    except ValueError as error:
        parser.error(str(error))
    try:
        audio = asyncio.run(
            speak(base_url, args.api_key, args.model, args.cartesia_version, args.voice, args.text)
        )
    except APIError as error:  # refused, a wrong key, no capacity...
        parser.exit(1, f"{parser.prog}: {error}\n")
    try:
        args.out.write_bytes(audio.to_wav_bytes())
    except OSError as error:
        parser.exit(1, f"{parser.prog}: cannot write {args.out}: {error.strerror}\n")
    print(f"wrote {args.out}: {audio.duration:.2f} s at {audio.sample_rate} Hz")


if __name__ == "__main__":
    main()
