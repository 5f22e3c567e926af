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
import statistics
import sys
from typing import TYPE_CHECKING

from agent_calls import (
    RATE,
    TEXT,
    VOICE,
    Close,
    Speak,
    client_call,
    livekit_stream_call,
    livekit_synthesize_call,
    percentile,
    pipecat_call,
    prepare,
    start_server,
)

if TYPE_CHECKING:
    from sonic_deploy.client.livekit import SonicSageMakerTTS

GOAL_P50_MS, GOAL_P99_MS = 1.0, 3.0


async def bare_caller(base: str) -> tuple[Speak, Close]:
    from sonic_deploy.client import SageMakerClient

    client = SageMakerClient("bench", region="us-east-2", endpoint_url=base)
    return lambda: client_call(client.speak(TEXT, voice=VOICE, sample_rate=RATE)), client.close


async def pipecat_caller(base: str) -> tuple[Speak, Close]:
    from sonic_deploy.client.pipecat import SonicSageMakerTTSService

    service = SonicSageMakerTTSService(
        endpoint_name="bench", region="us-east-2", endpoint_url=base, voice_id=VOICE, sample_rate=RATE
    )
    return await pipecat_call(service, TEXT)


def livekit_tts(base: str) -> SonicSageMakerTTS:
    from sonic_deploy.client.livekit import SonicSageMakerTTS

    return SonicSageMakerTTS(
        endpoint_name="bench", region="us-east-2", endpoint_url=base, voice=VOICE, sample_rate=RATE
    )


async def livekit_caller(base: str) -> tuple[Speak, Close]:
    tts = livekit_tts(base)
    return lambda: livekit_synthesize_call(tts, TEXT), tts.aclose


async def livekit_stream_caller(base: str) -> tuple[Speak, Close]:
    """What an AgentSession does with a streaming TTS: the LLM's text pushed into `stream()`, cut into
    sentences by LiveKit's tokenizer, one request per sentence."""
    tts = livekit_tts(base)
    return lambda: livekit_stream_call(tts, TEXT), tts.aclose


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
                spoken = await callers[name][0]()
                if index >= warmup:
                    figures[name].append(spoken.first_s * 1000)
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
    server, base = start_server(
        prepare(args.pin),
        *("--first-byte-ms", str(args.first_byte_ms), "--jitter-ms", "0", "--chunk-ms", "20"),
        *("--pace", "0.5", "--audio-ms", "400"),
    )
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
