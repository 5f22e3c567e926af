"""In-memory hops for the call's own logic (stamps, their arithmetic, errors, bounds). The protocols are
tested against the stand-ins and real clients elsewhere; these say only what the call does with what a hop
gives it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

from sonic_deploy.client.errors import SonicError
from sonic_deploy.client.turn_hops import Message, Token, Trace, Transcript
from sonic_deploy.turn.caller_audio import speech_end_s
from sonic_deploy.turn.speakers import Reply


class FakeSession:
    """Finals `final_s` after the last frame holding speech has come in; `fail_after` frames, then an error."""

    def __init__(
        self, final_s: float, encoding: str, rate: int, fail_after: int | None, never_final: bool
    ) -> None:
        self._final_s, self._encoding, self._rate = final_s, encoding, rate
        self._fail_after, self._never_final = fail_after, never_final
        self._queue: asyncio.Queue[Transcript] = asyncio.Queue()
        self._pending: asyncio.TimerHandle | None = None
        self.frames = 0

    async def send(self, audio: bytes) -> None:
        self.frames += 1
        if self._fail_after is not None and self.frames > self._fail_after:
            raise SonicError("cut", "the fake line dropped")
        if speech_end_s(self._encoding, self._rate, audio) is not None:
            if self._pending is None:
                self._queue.put_nowait(Transcript(time.perf_counter(), "I'd", False))
            else:
                self._pending.cancel()
            if not self._never_final:
                self._pending = asyncio.get_running_loop().call_later(self._final_s, self._final)

    def _final(self) -> None:
        self._pending = None
        self._queue.put_nowait(Transcript(time.perf_counter(), "I'd like a table.", True))

    async def receive(self) -> Transcript:
        return await self._queue.get()

    async def close(self) -> None:
        if self._pending is not None:
            self._pending.cancel()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


@dataclass
class FakeStt:
    final_s: float = 0.05
    fail_after: int | None = None
    never_final: bool = False
    refuse: bool = False
    name: str = "fake"
    sessions: list[FakeSession] = field(default_factory=list)

    async def session(self, *, encoding: str, sample_rate: int) -> FakeSession:
        if self.refuse:
            raise SonicError("refused", "nothing listens there")
        session = FakeSession(self.final_s, encoding, sample_rate, self.fail_after, self.never_final)
        self.sessions.append(session)
        return session


@dataclass
class FakeLlm:
    first_token_s: float = 0.03
    token_s: float = 0.005
    reply: tuple[str, ...] = ("Sure,", " at eight.", " Anything", " else?")
    fail_on_turns: tuple[int, ...] = ()
    hang: bool = False
    hang_after_first: bool = False
    name: str = "fake"
    seen: list[list[Message]] = field(default_factory=list)

    async def stream(
        self, messages: Sequence[Message], *, system: str | None = None, trace: Trace | None = None
    ) -> AsyncIterator[Token]:
        self.seen.append(list(messages))
        if trace is not None:
            trace["sent_at"] = time.perf_counter()
        if len(self.seen) - 1 in self.fail_on_turns:
            raise SonicError("status_429", "slow down", 429)
        await asyncio.sleep(self.first_token_s)
        for index, text in enumerate(self.reply):
            if index:
                await asyncio.sleep(self.token_s)
            if self.hang or (self.hang_after_first and index == 1):
                await asyncio.sleep(3600)
            yield Token(time.perf_counter(), text)

    async def close(self) -> None:
        pass


@dataclass
class FakeSpeaker:
    """A first byte `first_byte_s` after the first sentence, audible `audible_s` later, `audio_s` long."""

    first_byte_s: float = 0.02
    audible_s: float = 0.01
    audio_s: float = 0.05
    fail: bool = False
    silent: bool = False
    name: str = "fake"
    texts: list[list[str]] = field(default_factory=list)

    async def reply(self, tokens: AsyncIterator[Token], reply: Reply) -> None:
        text = ""
        async for token in tokens:
            text += token.text
            if reply.handed_at is None and text.rstrip().endswith((".", "?", "!")):
                reply.handed_at = time.perf_counter()
                reply.text.append(text)
                if self.fail:
                    raise SonicError("closed_1013", "over capacity")
                await asyncio.sleep(self.first_byte_s)
                reply.first_byte_at = time.perf_counter()
                if not self.silent:
                    reply.heard_at = reply.first_byte_at + self.audible_s
                reply.audio_s = self.audio_s
        self.texts.append(reply.text)

    async def close(self) -> None:
        pass
