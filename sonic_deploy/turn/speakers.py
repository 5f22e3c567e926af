"""The TTS hop of a turn: the model's tokens handed to Sonic as a voice agent hands them, and when the caller
hears the reply.

Both routes get whole sentences, as pipecat's and LiveKit's aggregators cut them (a sentence ends with `.`,
`!` or `?`, and any closing quote or bracket, once the next word has begun): on the WebSocket API as pieces of one context with
`continue: true` (one audio stream per reply, `max_buffer_delay_ms` 0, what the frameworks send); on
SageMaker, whose Marketplace container takes no continuations, one request per sentence, in order. The
first audio byte is when the first chunk's bytes arrived; the first audible sample is heard when playback,
begun at the first byte and running in real time, reaches it, or when its chunk arrives if that is later.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from sonic_deploy.audio import BYTES_PER_SAMPLE, AudibleDetector, AudioFormat
from sonic_deploy.client.errors import AudioChunk
from sonic_deploy.client.turn_hops import Token

if TYPE_CHECKING:  # the clients' libraries (aiohttp, websockets) load when a speaker is made, not before
    from sonic_deploy.client.sagemaker import SageMakerClient
    from sonic_deploy.client.websocket import WebSocketClient

# A sentence ends at `.`, `!` or `?` (and any closing quote or bracket) once whitespace and the next word's
# first character have come: so "8.30" and "Dr. Smith" stay whole, and the first sentence waits one token
# for its lookahead, as pipecat's SimpleTextAggregator waits for it.
_BOUNDARY = re.compile(r"[.!?][\"')\]]*(\s+)(?=\S)")
_ABBREVIATIONS = frozenset(
    {"mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "etc", "e.g", "i.e", "a.m", "p.m"}
)


class Sentences:
    """Tokens in, whole sentences out, each as soon as the next one has begun (the text's own whitespace
    kept: the sentences join back to the text)."""

    def __init__(self) -> None:
        self._text = ""

    def feed(self, text: str) -> list[str]:
        self._text += text
        sentences, start = [], 0
        for boundary in _BOUNDARY.finditer(self._text):
            words = self._text[start : boundary.start()].split()
            last = words[-1].lower() if words else ""
            if last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
                continue  # "Dr. Smith", "J. Smith": not the end of a sentence
            sentences.append(self._text[start : boundary.end(1)])
            start = boundary.end(1)
        self._text = self._text[start:]
        return sentences

    def rest(self) -> str | None:
        """What is left at the end of the reply (its last sentence needs no lookahead)."""
        rest, self._text = self._text, ""
        return rest if rest.strip() else None


@dataclass
class Reply:
    """What one reply's TTS hop did, on `time.perf_counter()`."""

    handed_at: float | None = None  # the first text handed to the TTS client
    first_byte_at: float | None = None
    heard_at: float | None = None  # the first audible sample reaches the caller's ear (see the module)
    audio_s: float = 0.0
    text: list[str] = field(default_factory=list)


class Listener:
    """One reply's audio as it arrives: its first byte, when its first audible sample is heard, its length."""

    def __init__(self, audio: AudioFormat, reply: Reply, threshold_db: float) -> None:
        self._audio, self._reply = audio, reply
        self._detector = AudibleDetector(audio, threshold_db)
        self._bytes = 0

    def hear(self, chunk: AudioChunk) -> None:
        reply = self._reply
        if reply.first_byte_at is None:
            reply.first_byte_at = chunk.at
        if not self._detector.found and self._detector.feed(chunk.data):
            played = self._detector.samples_before / self._audio.sample_rate
            reply.heard_at = max(chunk.at, reply.first_byte_at + played)
        self._bytes += len(chunk.data)
        reply.audio_s = self._bytes / BYTES_PER_SAMPLE[self._audio.encoding] / self._audio.sample_rate


class Speaker(Protocol):
    name: str

    async def reply(self, tokens: AsyncIterator[Token], reply: Reply) -> None:
        """Speak the reply the tokens make, filling `reply` as it goes; a `SonicError` from either side."""
        ...

    async def close(self) -> None: ...


@dataclass
class Voice:
    voice: str
    audio: AudioFormat
    threshold_db: float = -50.0
    language: str | None = "en"


class WebSocketSpeaker:
    """The ECS route (or Cartesia's cloud): one context per reply, its sentences as continuations."""

    name = "ecs"

    def __init__(self, client: WebSocketClient, voice: Voice) -> None:
        self._client, self._voice = client, voice

    async def reply(self, tokens: AsyncIterator[Token], reply: Reply) -> None:
        voice = self._voice
        listener = Listener(voice.audio, reply, voice.threshold_db)
        sentences, first, more = Sentences(), list[str](), True
        # The context opens once the first sentence is whole, and the TTS hop starts there, as on SageMaker:
        # on both routes it holds the wait for a socket or a connection, not the aggregate hop before it.
        async for token in tokens:
            if first := sentences.feed(token.text):
                break
        else:
            more, first = False, [rest] if (rest := sentences.rest()) is not None else []
        if not first:
            return
        reply.handed_at = time.perf_counter()
        turn = self._client.utterance(
            voice=voice.voice,
            sample_rate=voice.audio.sample_rate,
            encoding=voice.audio.encoding,
            language=voice.language,
        )
        async with turn:

            async def listen() -> None:
                async for chunk in turn:
                    listener.hear(chunk)

            async def hand(text: str) -> None:
                reply.text.append(text)
                await turn.send(text)

            async with asyncio.TaskGroup() as group:
                for sentence in first:
                    await hand(sentence)
                group.create_task(listen())
                if more:
                    async for token in tokens:
                        for sentence in sentences.feed(token.text):
                            await hand(sentence)
                    if (rest := sentences.rest()) is not None:
                        await hand(rest)
                await turn.end()

    async def close(self) -> None:
        await self._client.close()


class SageMakerSpeaker:
    """The SageMaker route: one request per sentence, each sent when the one before has finished."""

    name = "sagemaker"

    def __init__(self, client: SageMakerClient, voice: Voice) -> None:
        self._client, self._voice = client, voice

    async def reply(self, tokens: AsyncIterator[Token], reply: Reply) -> None:
        voice = self._voice
        listener = Listener(voice.audio, reply, voice.threshold_db)
        queue: asyncio.Queue[str | None] = asyncio.Queue()

        async def speak() -> None:
            while (sentence := await queue.get()) is not None:
                if reply.handed_at is None:
                    reply.handed_at = time.perf_counter()
                reply.text.append(sentence)
                audio = self._client.speak(
                    sentence,
                    voice=voice.voice,
                    sample_rate=voice.audio.sample_rate,
                    encoding=voice.audio.encoding,
                    language=voice.language,
                )
                async with contextlib.aclosing(audio):
                    async for chunk in audio:
                        listener.hear(chunk)

        async with asyncio.TaskGroup() as group:
            group.create_task(speak())
            sentences = Sentences()
            async for token in tokens:
                for sentence in sentences.feed(token.text):
                    queue.put_nowait(sentence)
            if (rest := sentences.rest()) is not None:
                queue.put_nowait(rest)
            queue.put_nowait(None)

    async def close(self) -> None:
        await self._client.close()
