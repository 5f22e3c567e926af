"""Benchmark: the framework services' CPU per second of audio, beside the frameworks' own Cartesia services,
in one process and one run (issue 31).

One reference server (`probe serve`, another process, so its CPU is not counted) speaks both protocols on
one port: SageMaker's invocation stream and Cartesia's WebSocket API, 50 ms to the first byte, 20 ms chunks
at half real time, 60 ms of audio a character (2.8 s for the sentence). Eight callers speak the same
sentence, voice and sample rate (24 kHz, 16-bit PCM):

- `raw-http`: the floor under `bare-sm` on aiohttp: the same signed request, its body read by aiohttp,
  nothing decoded;
- `plain-http`: the same request and decoders as `bare-sm` on a plain asyncio Protocol instead of aiohttp,
  without the client's own work above them (bench/plain_http.py: the most a transport of our own could
  save; a measurement, not a client);
- `bare-sm`: `SageMakerClient.speak()`, one client for the level's calls;
- `bare-ws`: `WebSocketClient.speak()`, one client, one context per utterance on its pooled sockets;
- `pipecat-ours`: `SonicSageMakerTTSService` in a real pipecat pipeline `[before, service, after]`, from
  `before` passing a `TTSSpeakFrame` on to `after` receiving the first `TTSAudioRawFrame`;
- `pipecat-cartesia`: pipecat's own `CartesiaTTSService` (WebSocket, its defaults: word timestamps,
  `max_buffer_delay_ms` 0) in the same pipeline shape;
- `livekit-ours`: `SonicSageMakerTTS.stream()` as an AgentSession uses it (the text pushed, the input
  ended), to the first `SynthesizedAudio`;
- `livekit-cartesia`: LiveKit's own `cartesia.TTS.stream()` (its pooled WebSocket, word timestamps), the
  same way.

At each level N (`--levels`, default 1 and 16) every caller gets N calls: N pipelines, N streams on one
TTS, or N utterances on one client, all set up before the level starts. Round after round the callers take
turns, each running its N calls at once, the order shifting by one each round, so that whatever else the
machine does falls on all alike; the first `--warmup` rounds of a level (connections, first imports) are
not counted. A caller's CPU is this process's own (`time.process_time()`: every thread of it; not the
server's) from its calls' start to 50 ms after the last one ended (what a framework still does once the
audio is out counts too), divided by the seconds of audio the round delivered. The CPU this process spends
with every caller idle (pipelines waiting, sockets open) is measured once per level and printed: it falls
into every caller's rounds alike. What exists after the warm-up is frozen out of the cycle collector: a
full collection walks all this process holds, both frameworks at once where an agent loads one, and
stalled a whole round by 70-90 ms. Audio is what the caller received: LiveKit's plugin ends each stream
with a " " piece, which the stand-in speaks (60 ms, 2% more audio for the same CPU), and LiveKit's emitter
ends each stream with a 10 ms frame. A round's N calls start together, so one stall moves N first-audio
samples at once: at 16 calls, p99 is one bad round's figure; p50 is the one to compare.

It prints each caller's CPU ms per audio second (all rounds together, and the median round), CPU ms per
utterance, first audio p50/p99 and what each service adds to its bare client (ours to `bare-sm`, the
frameworks' own to `bare-ws`), then the goals: each of our services at most 1.10 x the CPU per audio
second of its framework's Cartesia service, and the bare client's CPU halved from the last round's (8.9 ms
an utterance, its length not recorded: printed, not compared). At 1 call each 20 ms chunk wakes this
process on its own, and what a wake-up costs (caches, clock speed, pinning) moves with the machine more than
with the code: compare callers within a run, not runs. pipecat's and LiveKit's logs are set to WARNING
(pipecat logs every frame at DEBUG, on the loop being measured). A measurement, not a test: nothing here
passes or fails CI.

    .venv/bin/python bench/adapter_cost.py [--rounds 30] [--warmup 2] [--levels 1,16] [--pin] [--callers A,B]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent_calls import (
    RATE,
    SAMPLE_BYTES,
    TEXT,
    VOICE,
    Clock,
    Close,
    Speak,
    Spoken,
    client_call,
    livekit_stream_call,
    percentile,
    pipecat_call,
    prepare,
    start_server,
)

if TYPE_CHECKING:
    from pipecat.services.tts_service import TTSService

GOAL_RATIO = 1.10  # ours / the framework's own Cartesia service, CPU per audio second
LAST_BARE_MS_PER_UTTERANCE = 8.9  # the last round's bare client (issue 31); the goal halves it
KEY, MODEL = "bench", "sonic-3"  # the stand-in takes any key and model id
SETTLE_S = 0.05  # after a round's last call: the framework's own work past the audio, in its round
IDLE_S = 1.0
FIRST_BYTE_MS = 50.0
# Each service beside the bare client it stands on, and our services beside the framework's own.
BARE = {
    "pipecat-ours": "bare-sm",
    "pipecat-cartesia": "bare-ws",
    "livekit-ours": "bare-sm",
    "livekit-cartesia": "bare-ws",
}
RIVALS = {"pipecat": ("pipecat-ours", "pipecat-cartesia"), "livekit": ("livekit-ours", "livekit-cartesia")}


def ws_url(base: str) -> str:
    return f"{base.replace('http', 'ws', 1)}/tts/websocket"


async def bare_sm(base: str, count: int) -> tuple[list[Speak], Close]:
    from sonic_deploy.client import SageMakerClient

    client = SageMakerClient("bench", region="us-east-2", endpoint_url=base)
    return [lambda: client_call(client.speak(TEXT, voice=VOICE, sample_rate=RATE))] * count, client.close


async def raw_http(base: str, count: int) -> tuple[list[Speak], Close]:
    """The floor under `bare-sm`: the same signed request (the client's own `_send`: a measurement, not an
    API), its body read by aiohttp and nothing decoded. The audio it stands for is one decoded utterance's,
    measured at set-up."""
    from sonic_deploy.client import SageMakerClient
    from sonic_deploy.client.sagemaker import request_body

    client = SageMakerClient("bench", region="us-east-2", endpoint_url=base)
    audio_s = (await client_call(client.speak(TEXT, voice=VOICE, sample_rate=RATE))).audio_s

    async def speak() -> Spoken:
        clock = Clock()
        response = await client._send(request_body(TEXT, voice=VOICE, sample_rate=RATE))
        try:
            if response.status != 200:
                raise SystemExit(f"raw-http: the stand-in answered {response.status}: the run is broken")
            async for data in response.content.iter_any():
                clock.heard(audio_s if clock.first is None and data else 0.0)
        finally:
            response.release()
        return clock.spoken()

    return [speak] * count, client.close


async def plain_http(base: str, count: int) -> tuple[list[Speak], Close]:
    from plain_http import PlainHttp

    from sonic_deploy.client import SageMakerClient

    plain = PlainHttp(SageMakerClient("bench", region="us-east-2", endpoint_url=base), TEXT, VOICE, RATE)

    async def speak() -> Spoken:
        clock = Clock()
        async for piece in plain.speak():
            clock.heard(len(piece) / (SAMPLE_BYTES * RATE))
        return clock.spoken()

    return [speak] * count, plain.close


async def bare_ws(base: str, count: int) -> tuple[list[Speak], Close]:
    from sonic_deploy.client import WebSocketClient

    client = WebSocketClient(ws_url(base), api_key=KEY, model_id=MODEL)
    return [lambda: client_call(client.speak(TEXT, voice=VOICE, sample_rate=RATE))] * count, client.close


async def pipelines(services: list[TTSService]) -> tuple[list[Speak], Close]:
    """One pipeline per call, as one per phone call."""
    calls = [await pipecat_call(service, TEXT) for service in services]

    async def close() -> None:
        for _, ended in calls:
            await ended()

    return [speak for speak, _ in calls], close


async def pipecat_ours(base: str, count: int) -> tuple[list[Speak], Close]:
    from sonic_deploy.client.pipecat import SonicSageMakerTTSService

    return await pipelines(
        [
            SonicSageMakerTTSService(
                endpoint_name="bench", region="us-east-2", endpoint_url=base, voice_id=VOICE, sample_rate=RATE
            )
            for _ in range(count)
        ]
    )


async def pipecat_cartesia(base: str, count: int) -> tuple[list[Speak], Close]:
    from pipecat.services.cartesia.tts import CartesiaTTSService

    settings = CartesiaTTSService.Settings(model=MODEL, voice=VOICE)
    return await pipelines(
        [
            CartesiaTTSService(api_key=KEY, url=ws_url(base), sample_rate=RATE, settings=settings)
            for _ in range(count)
        ]
    )


async def livekit_ours(base: str, count: int) -> tuple[list[Speak], Close]:
    from sonic_deploy.client.livekit import SonicSageMakerTTS

    tts = SonicSageMakerTTS(
        endpoint_name="bench", region="us-east-2", endpoint_url=base, voice=VOICE, sample_rate=RATE
    )
    return [lambda: livekit_stream_call(tts, TEXT)] * count, tts.aclose


async def livekit_cartesia(base: str, count: int) -> tuple[list[Speak], Close]:
    import aiohttp
    from livekit.plugins import cartesia

    # Outside a LiveKit job there is no job's HTTP session: the plugin is given one (examples/livekit_ecs.py).
    session = aiohttp.ClientSession()
    tts = cartesia.TTS(
        base_url=base, api_key=KEY, model=MODEL, voice=VOICE, sample_rate=RATE, http_session=session
    )

    async def close() -> None:
        await tts.aclose()
        await session.close()

    return [lambda: livekit_stream_call(tts, TEXT)] * count, close


CALLERS: dict[str, Callable[[str, int], Awaitable[tuple[list[Speak], Close]]]] = {
    "raw-http": raw_http,
    "plain-http": plain_http,
    "bare-sm": bare_sm,
    "bare-ws": bare_ws,
    "pipecat-ours": pipecat_ours,
    "pipecat-cartesia": pipecat_cartesia,
    "livekit-ours": livekit_ours,
    "livekit-cartesia": livekit_cartesia,
}


@dataclass
class Figures:
    """One caller's counted rounds at one level."""

    cpu_s: list[float] = field(default_factory=list)  # per round
    audio_s: list[float] = field(default_factory=list)  # per round
    first_ms: list[float] = field(default_factory=list)  # per call

    def add(self, cpu_s: float, spoken: list[Spoken]) -> None:
        self.cpu_s.append(cpu_s)
        self.audio_s.append(sum(call.audio_s for call in spoken))
        self.first_ms.extend(call.first_s * 1000 for call in spoken)

    @property
    def cpu_ms_per_audio_s(self) -> float:
        return 1000 * sum(self.cpu_s) / sum(self.audio_s)

    @property
    def round_median(self) -> float:
        return statistics.median(
            1000 * cpu / audio for cpu, audio in zip(self.cpu_s, self.audio_s, strict=True)
        )

    @property
    def cpu_ms_per_utterance(self) -> float:
        return 1000 * sum(self.cpu_s) / len(self.first_ms)

    @property
    def utterance_s(self) -> float:
        return sum(self.audio_s) / len(self.first_ms)


@dataclass
class Level:
    calls: int
    idle_ms_per_s: float
    figures: dict[str, Figures]


async def one_round(calls: list[Speak]) -> tuple[float, list[Spoken]]:
    began = time.process_time()
    spoken = await asyncio.gather(*(speak() for speak in calls))
    await asyncio.sleep(SETTLE_S)
    return time.process_time() - began, spoken


async def take_turns(callers: dict[str, tuple[list[Speak], Close]], rounds: int) -> dict[str, Figures]:
    figures = {name: Figures() for name in callers}
    order = list(callers)
    for index in range(rounds):
        shift = index % len(order)  # each caller first in turn
        for name in order[shift:] + order[:shift]:
            figures[name].add(*await one_round(callers[name][0]))
    return figures


async def measure_level(base: str, count: int, rounds: int, warmup: int, names: list[str]) -> Level:
    callers: dict[str, tuple[list[Speak], Close]] = {}
    try:
        for name in names:
            callers[name] = await CALLERS[name](base, count)
        await take_turns(callers, warmup)
        # Collections walk what the calls make, not both frameworks at once (the docstring says why).
        gc.collect()
        gc.freeze()
        began = time.process_time()
        await asyncio.sleep(IDLE_S)
        idle_ms_per_s = 1000 * (time.process_time() - began) / IDLE_S
        return Level(count, idle_ms_per_s, await take_turns(callers, rounds))
    finally:
        for _, close in callers.values():
            await close()
        gc.unfreeze()


async def run(base: str, levels: list[int], rounds: int, warmup: int, names: list[str]) -> list[Level]:
    return [await measure_level(base, count, rounds, warmup, names) for count in levels]


def report(levels: list[Level], rounds: int, warmup: int) -> None:
    print(f"# CPU of this process (not the server's) and first audio in ms, {rounds} rounds a level after "
          f"{warmup} warm-up; a round: each caller's N calls at once, caller after caller")  # fmt: skip
    print(f"{'caller':>16} {'N':>3} {'audio s':>8} {'ms/aud-s':>9} {'(round p50)':>11} {'ms/utt':>7} "
          f"{'first p50':>9} {'p99':>7} {'added p50':>9} {'p99':>7}")  # fmt: skip
    for level in levels:
        for name, figures in level.figures.items():
            p50, p99 = (percentile(figures.first_ms, q) for q in (0.5, 0.99))
            print(f"{name:>16} {level.calls:>3} {sum(figures.audio_s):8.1f} {figures.cpu_ms_per_audio_s:9.2f} "
                  f"{figures.round_median:11.2f} {figures.cpu_ms_per_utterance:7.2f} {p50:9.2f} {p99:7.2f}",
                  end="")  # fmt: skip
            bare = level.figures[BARE[name]].first_ms if BARE.get(name) in level.figures else None
            print(f" {p50 - percentile(bare, 0.5):9.2f} {p99 - percentile(bare, 0.99):7.2f}" if bare else "")
        print(f"{'(idle)':>16} {level.calls:>3}  {level.idle_ms_per_s:.2f} ms CPU a second, all calls set up")
    print(
        f"# goal: each service's CPU per audio second <= {GOAL_RATIO:.2f} x its framework's Cartesia service's"
    )
    for level in levels:
        for framework, (ours, theirs) in RIVALS.items():
            if ours not in level.figures or theirs not in level.figures:
                continue
            mine, rival = (level.figures[name].cpu_ms_per_audio_s for name in (ours, theirs))
            verdict = "met" if mine / rival <= GOAL_RATIO else "NOT met"
            print(f"{framework:>16} {level.calls:>3}  ours {mine:6.2f} / Cartesia {rival:6.2f} ms per audio s "
                  f"= {mine / rival:.2f}  {verdict}")  # fmt: skip
    print(f"# goal: the bare client's CPU per audio second halves (last round: {LAST_BARE_MS_PER_UTTERANCE} ms "
          "an utterance, its length not recorded: measured here, not compared)")  # fmt: skip
    for level in levels:
        for name in ("raw-http", "plain-http", "bare-sm", "bare-ws"):
            if name not in level.figures:
                continue
            figures = level.figures[name]
            print(f"{name:>16} {level.calls:>3}  {figures.cpu_ms_per_audio_s:6.2f} ms per audio s, "
                  f"{figures.cpu_ms_per_utterance:5.2f} ms an utterance of {figures.utterance_s:.2f} s")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--levels", default="1,16", help="concurrent calls per caller, comma-separated")
    parser.add_argument("--pin", action="store_true", help="server on CPU 0, this process on CPU 1")
    parser.add_argument(
        "--callers",
        default=",".join(CALLERS),
        help=f"comma-separated, of {', '.join(CALLERS)} (default: all)",
    )
    args = parser.parse_args()
    try:
        levels = [int(level) for level in args.levels.split(",")]
    except ValueError:
        parser.error(f"--levels {args.levels!r}: not whole numbers. Fix: e.g. --levels 1,16")
    if args.rounds < 1 or args.warmup < 0 or min(levels) < 1:
        parser.error("--rounds and each level are at least 1, --warmup at least 0")
    names = args.callers.split(",")
    if unknown := [name for name in names if name not in CALLERS]:
        parser.error(f"--callers: no caller {', '.join(unknown)}. Fix: choose from {', '.join(CALLERS)}")
    server, base = start_server(
        prepare(args.pin),
        *("--first-byte-ms", str(FIRST_BYTE_MS), "--jitter-ms", "0", "--chunk-ms", "20", "--pace", "0.5"),
    )
    print(f"# {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the start"
          f"{', server on CPU 0, bench on CPU 1' if args.pin else ''}")  # fmt: skip
    try:
        measured = asyncio.run(run(base, levels, args.rounds, args.warmup, names))
    finally:
        server.kill()
    report(measured, args.rounds, args.warmup)
    print(f"# load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
