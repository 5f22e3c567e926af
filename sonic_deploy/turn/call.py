"""One simulated call: the caller's phone line, and each turn timed from the end of the caller's speech.

The line sends a frame of audio every `frame_ms`, each when its audio has been spoken (the frame covering
[t, t + 20 ms) goes at t + 20 ms), the caller's utterance when it is the caller's turn and silence
otherwise, as a phone line never stops. A turn:

1. the caller speaks an utterance; its speech ends at the line time of the file's last voiced sample;
2. the speech-to-text service sends partials, then the final transcript (the first final at or after the
   end of speech);
3. the transcript, with the conversation so far, goes to the language model; its tokens stream into the
   TTS hop (`speakers`), which hands Sonic sentences and listens for the first audible sample;
4. the caller listens to the reply to its end, waits `gap_s`, and speaks the next utterance.

Every stamp is `time.perf_counter()`; each hop is the time between two stamps, so the hops add up to the
turn exactly: `stt` (speech end to final transcript), `llm` (transcript to the first token), `aggregate`
(first token to the first sentence handed to TTS), `tts` (handed to the first audio byte), `audible`
(first byte to the first audible sample heard). An error in any hop is recorded on the turn, named by its
hop and kind; each wait is bounded, so a hop that says nothing is a `timeout`, never a hang.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from sonic_deploy.client.errors import SonicError
from sonic_deploy.client.turn_hops import (
    LanguageModel,
    Message,
    SpeechSession,
    SpeechToText,
    Token,
    Transcript,
)
from sonic_deploy.turn.caller_audio import CallerAudio, silence
from sonic_deploy.turn.speakers import Reply, Speaker

HOPS = ("stt", "llm", "aggregate", "tts", "audible")
# The stamps of a turn, in the order they happen, each as ms from the end of the caller's speech.
STAMPS = (
    "speech_start",
    "first_partial",
    "speech_end",
    "final_transcript",
    "llm_request",
    "llm_first_token",
    "tts_handed",
    "tts_first_byte",
    "first_audible",
)
Emit = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Hops:
    stt: SpeechToText
    llm: LanguageModel
    tts: Speaker
    system: str | None = None


@dataclass(frozen=True)
class CallPlan:
    utterances: tuple[CallerAudio, ...]  # played in order, again from the first if there are more turns
    turns: int = 3
    warmup_turns: int = 1
    frame_ms: int = 20
    gap_s: float = 0.5
    stt_timeout_s: float = 10.0  # for the final transcript, from the end of speech
    reply_timeout_s: float = 60.0  # for the reply, model and speech, from the final transcript


class HopError(Exception):
    """A hop failed: `hop` names it (stt, llm, tts), `error` is the typed error."""

    def __init__(self, hop: str, error: SonicError) -> None:
        super().__init__(f"{hop}: {error}")
        self.hop, self.error = hop, error


def _as_hop_error(error: BaseException, hop: str) -> BaseException:
    """What a failure inside the TTS hop was: an error of the model's tokens it was reading keeps its hop."""
    if isinstance(error, BaseExceptionGroup):
        leaves = [_as_hop_error(leaf, hop) for leaf in error.exceptions]
        return next((leaf for leaf in leaves if isinstance(leaf, HopError)), error)
    if isinstance(error, SonicError):
        return HopError(hop, error)
    return error


class Line:
    """The caller's side of the call: frames at real-time pace, speech when given, silence between."""

    def __init__(
        self, session: SpeechSession, audio: CallerAudio, frame_ms: int, failed: Callable[[HopError], None]
    ) -> None:
        self._session, self._failed = session, failed
        self._frame_ms, self._frame_s = frame_ms, frame_ms / 1000
        self._silence = silence(audio.encoding, audio.sample_rate * frame_ms // 1000)
        self._pending: collections.deque[bytes] = collections.deque()
        self._taken = 0
        self._origin = time.perf_counter()
        self.late_s = 0.0  # how late the worst frame of the current utterance went out (the client's lag)

    def play(self, audio: CallerAudio) -> float:
        """Queue an utterance after what is still to be sent; when its first frame's audio begins, on the
        line's schedule. Its speech ends `audio.speech_end_s` later on that schedule: frames go when due, and
        one the client sends late does not move the caller's speech (a speech-to-text service, the
        stand-ins among them, places speech on the audio's own timeline, not on when each frame came)."""
        begins = self._origin + (self._taken + len(self._pending)) * self._frame_s
        self.late_s = 0.0
        self._pending.extend(audio.frames(self._frame_ms))
        return begins

    async def run(self) -> None:
        while True:
            due = self._origin + (self._taken + 1) * self._frame_s
            wait = due - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            self.late_s = max(self.late_s, time.perf_counter() - due)
            frame = self._pending.popleft() if self._pending else self._silence
            self._taken += 1
            try:
                await self._session.send(frame)
            except SonicError as error:
                self._failed(HopError("stt", error))  # the turn waiting, and every one after it, fails
                return


class Transcripts:
    """A session's transcripts as they come, read all the time (a socket left unread stalls the service),
    and the session's failure, sending or receiving, for the turn that waits on it."""

    def __init__(self, session: SpeechSession) -> None:
        self._session = session
        self._queue: asyncio.Queue[Transcript | HopError] = asyncio.Queue()

    def failed(self, error: HopError) -> None:
        self._queue.put_nowait(error)

    async def run(self) -> None:
        while True:
            try:
                transcript = await self._session.receive()
            except SonicError as error:
                self.failed(HopError("stt", error))
                return
            self._queue.put_nowait(transcript)

    async def turn(
        self, began_at: float, ends_at: float, timeout_s: float
    ) -> tuple[float | None, Transcript]:
        """The first partial after `began_at`, and the final transcript: the first final at or after
        `ends_at` (finals before it are pauses inside the utterance, and join its text)."""
        first_partial: float | None = None
        finals: list[str] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (ends_at + timeout_s - time.perf_counter())
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    got = await self._queue.get()
            except TimeoutError:
                message = f"no final transcript within {timeout_s:g} s of the end of speech"
                raise HopError("stt", SonicError("timeout", message)) from None
            if isinstance(got, HopError):
                self._queue.put_nowait(got)  # the session is gone for the turns after this one too
                raise got
            if got.at < began_at:
                continue  # what is left of the turn before
            if not got.final:
                first_partial = first_partial or got.at
            elif got.at >= ends_at:
                return first_partial, Transcript(got.at, " ".join([*finals, got.text]).strip(), True)
            else:
                finals.append(got.text)


class _Reading:
    """The model's reply read from the moment its request can go, as an agent sends it when the transcript
    is final, not when the TTS hop first asks for text (after opening its own context); the tokens wait in
    a queue for the TTS hop. The first token's stamp is its bytes' arrival, whenever it is read."""

    def __init__(self, tokens: AsyncIterator[Token], stamps: dict[str, float], text: list[str]) -> None:
        self._queue: asyncio.Queue[Token | HopError | None] = asyncio.Queue()
        self._tokens, self._stamps, self._text = tokens, stamps, text
        # Ended (whole, or with an error): a timeout after it is not the model's. Completed: ended whole.
        self.finished = self.completed = False
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        try:
            async for token in self._tokens:
                self._stamps.setdefault("llm_first_token", token.at)
                self._text.append(token.text)
                self._queue.put_nowait(token)
            if not "".join(self._text).strip():
                raise SonicError("empty", "the model's reply had no text")
            self.completed = self.finished = True
            self._queue.put_nowait(None)
        except SonicError as error:
            self.finished = True
            self._queue.put_nowait(HopError("llm", error))
        except Exception as error:  # a client's bug: named and counted, never a turn left waiting
            self.finished = True
            self._queue.put_nowait(HopError("llm", SonicError("client_error", repr(error))))
        finally:  # (cancelled, it has not finished: a reply timeout while it reads is the model's)
            aclose = getattr(self._tokens, "aclose", None)
            if aclose is not None:
                # A reply cut short ends its request, not when the garbage collector gets to it.
                await aclose()

    async def tokens(self) -> AsyncGenerator[Token]:
        while (item := await self._queue.get()) is not None:
            if isinstance(item, HopError):
                raise item
            yield item

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


@dataclass
class _Call:
    hops: Hops
    plan: CallPlan
    line: Line
    transcripts: Transcripts
    history: list[Message]

    async def turn(self, audio: CallerAudio, stamps: dict[str, float]) -> dict[str, Any]:
        """One turn, its stamps put in `stamps` as they happen (so a failed turn keeps the ones it got)."""
        plan, hops = self.plan, self.hops
        began = self.line.play(audio)
        stamps["speech_start"], stamps["speech_end"] = began, began + audio.speech_end_s
        first_partial, final = await self.transcripts.turn(began, stamps["speech_end"], plan.stt_timeout_s)
        if first_partial is not None:
            stamps["first_partial"] = first_partial
        stamps["final_transcript"] = final.at
        if not final.text.strip():  # an agent has nothing to answer (and Bedrock refuses blank text)
            raise HopError("stt", SonicError("empty", "the final transcript had no text"))
        reply, text, trace = Reply(), list[str](), dict[str, float]()
        reading: _Reading | None = None
        try:
            async with asyncio.timeout(plan.reply_timeout_s):
                asked = [*self.history, Message("user", final.text)]
                reading = _Reading(hops.llm.stream(asked, system=hops.system, trace=trace), stamps, text)
                try:
                    async with contextlib.aclosing(reading.tokens()) as tokens:
                        await hops.tts.reply(tokens, reply)
                except (SonicError, BaseExceptionGroup) as error:
                    raise _as_hop_error(error, "tts") from error
                finally:
                    await reading.close()
        except TimeoutError:
            hop = "tts" if reading is not None and reading.finished else "llm"
            message = f"no whole reply within {plan.reply_timeout_s:g} s of the transcript"
            raise HopError(hop, SonicError("timeout", message)) from None
        finally:
            if "sent_at" in trace:
                stamps["llm_request"] = trace["sent_at"]
            if reading is not None and reading.completed:
                # The conversation so far: only whole exchanges (a model refuses a blank or missing turn).
                self.history += [Message("user", final.text), Message("assistant", "".join(text))]
            for name, at in (
                ("tts_handed", reply.handed_at),
                ("tts_first_byte", reply.first_byte_at),
                ("first_audible", reply.heard_at),
            ):
                if at is not None:
                    stamps[name] = at
        if reply.heard_at is None:
            raise HopError("tts", SonicError("silent", "the reply had no audible sample"))
        listening = reply.heard_at + reply.audio_s + plan.gap_s - time.perf_counter()
        if listening > 0:
            await asyncio.sleep(listening)  # the caller hears the reply out, then answers
        return {"transcript": final.text, "reply": "".join(text), "reply_audio_s": round(reply.audio_s, 3)}


async def run_call(index: int, hops: Hops, plan: CallPlan, emit: Emit) -> None:
    """One call of `plan.turns` turns on one speech-to-text session; each turn's line goes to `emit`. A
    session that cannot open, or breaks, fails the turn it was for, counted even in warm-up (a run in which
    nothing worked must not look clean), and the call's remaining turns are emitted as `skipped`."""
    first = plan.utterances[0]

    def skip(turns: range, why: str) -> None:
        for turn in turns:
            audio = plan.utterances[turn % len(plan.utterances)]
            emit(
                {
                    "call": index,
                    "turn": turn,
                    "warmup": turn < plan.warmup_turns,
                    "utterance": audio.name,
                    "skipped": why,
                }
            )

    try:
        session = await hops.stt.session(encoding=first.encoding, sample_rate=first.sample_rate)
    except SonicError as error:
        emit(
            {
                "call": index,
                "turn": 0,
                "warmup": False,
                "utterance": first.name,
                "error": _error_fields("stt", error),
            }
        )
        skip(range(1, plan.turns), "no speech-to-text session")
        return
    async with session:
        transcripts = Transcripts(session)
        line = Line(session, first, plan.frame_ms, transcripts.failed)
        call = _Call(hops, plan, line, transcripts, [])
        background = [asyncio.create_task(line.run()), asyncio.create_task(transcripts.run())]
        try:
            for turn in range(plan.turns):
                audio = plan.utterances[turn % len(plan.utterances)]
                stamps: dict[str, float] = {}
                try:
                    outcome: dict[str, Any] = await call.turn(audio, stamps)
                except HopError as failed:
                    outcome = {"error": _error_fields(failed.hop, failed.error)}
                broken = "error" in outcome and outcome["error"]["hop"] == "stt"
                fields = sample(index, turn, turn < plan.warmup_turns and not broken, audio, stamps)
                emit({**fields, **outcome, "line_late_ms": round(line.late_s * 1000, 3)})
                if broken:
                    skip(range(turn + 1, plan.turns), "the speech-to-text session had ended")
                    break
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)


def _error_fields(hop: str, error: SonicError) -> dict[str, str]:
    return {"hop": hop, "kind": error.kind, "message": error.message[:300]}


def sample(
    call: int, turn: int, warmup: bool, audio: CallerAudio, stamps: dict[str, float]
) -> dict[str, Any]:
    """One turn's line of samples.jsonl: each stamp as ms from the end of speech, each hop in ms."""
    line: dict[str, Any] = {"call": call, "turn": turn, "warmup": warmup, "utterance": audio.name}
    if "speech_end" not in stamps:
        return line
    origin = stamps["speech_end"]
    line["at_ms"] = {name: round((stamps[name] - origin) * 1000, 3) for name in STAMPS if name in stamps}
    hops: dict[str, float] = {}
    for hop, start, end in zip(HOPS, _HOP_BOUNDS, _HOP_BOUNDS[1:], strict=False):
        if start in stamps and end in stamps:
            hops[hop] = round((stamps[end] - stamps[start]) * 1000, 3)
    line["hops_ms"] = hops
    if "first_audible" in stamps:
        line["turn_ms"] = round((stamps["first_audible"] - origin) * 1000, 3)
    if "first_partial" in stamps:
        onset = stamps["speech_start"] + audio.speech_start_s  # the first voiced sample, not the lead-in
        line["first_partial_ms"] = round((stamps["first_partial"] - onset) * 1000, 3)
    return line


# Where each hop starts and ends: the hops tile the turn, from the end of speech to the first audible sample.
_HOP_BOUNDS = (
    "speech_end",
    "final_transcript",
    "llm_first_token",
    "tts_handed",
    "tts_first_byte",
    "first_audible",
)
