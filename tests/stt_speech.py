"""What the speech-to-text tests share: a caller's utterance, sent at real-time pace, and the transcripts
a session gives back, every wait bounded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sonic_deploy.audio import nearest_code
from sonic_deploy.client.turn_hops import SpeechSession, Transcript

CHUNK_MS = 20
SPEECH_MS, SILENCE_MS = 600, 200
FINAL_MS = 300
# What a turn's waits take, at most, whatever the machine's load.
TIMEOUT_S = 15.0
# Every sample of the "speech" at this magnitude (-12 dBFS), so that its last voiced sample is the last
# sample of its last chunk, and the speech's end is known exactly on the sender's clock.
_LEVEL = 8192


def chunk(encoding: str, rate: int, voiced: bool) -> bytes:
    """20 ms of a square wave at 250 Hz (`voiced`) or of silence."""
    count = rate * CHUNK_MS // 1000
    period = rate // 250
    values = [(_LEVEL if (i // (period // 2)) % 2 else -_LEVEL) if voiced else 0 for i in range(count)]
    if encoding == "pcm_s16le":
        return b"".join(value.to_bytes(2, "little", signed=True) for value in values)
    if encoding == "pcm_mulaw":
        return bytes(nearest_code("pcm_mulaw", value) for value in values)
    raise ValueError(encoding)


async def speak(
    send: Callable[[bytes], Awaitable[None]],
    encoding: str,
    rate: int,
    speech_ms: int = SPEECH_MS,
    silence_ms: int = SILENCE_MS,
) -> float:
    """Speech then silence at real-time pace (a chunk of [t, t + 20 ms) sent at t + 20 ms); returns the
    speech's end, `time.perf_counter()`."""
    voiced, silent = chunk(encoding, rate, True), chunk(encoding, rate, False)
    began = time.perf_counter()
    chunks = [voiced] * (speech_ms // CHUNK_MS) + [silent] * (silence_ms // CHUNK_MS)
    for index, data in enumerate(chunks):
        await asyncio.sleep(max(0.0, began + (index + 1) * CHUNK_MS / 1000 - time.perf_counter()))
        await send(data)
    return began + speech_ms / 1000


@dataclass
class Turn:
    speech_end: float
    transcripts: list[Transcript]

    @property
    def partials(self) -> list[Transcript]:
        return [t for t in self.transcripts if not t.final]

    @property
    def final(self) -> Transcript:
        finals = [t for t in self.transcripts if t.final]
        assert len(finals) == 1, self.transcripts
        return finals[0]


async def turn(session: SpeechSession, encoding: str, rate: int, speech_ms: int = SPEECH_MS) -> Turn:
    """One turn: an utterance sent while the transcripts are read, until the final one."""
    transcripts: list[Transcript] = []

    async def read() -> None:
        while not (transcripts and transcripts[-1].final):
            transcripts.append(await session.receive())

    async with asyncio.timeout(TIMEOUT_S):
        reader = asyncio.create_task(read())
        try:
            speech_end = await speak(session.send, encoding, rate, speech_ms)
            await reader
        finally:
            reader.cancel()
    return Turn(speech_end, transcripts)
