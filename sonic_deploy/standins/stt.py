"""The speech-to-text hop of a turn, offline: Cartesia Ink's turns API and Amazon Transcribe's streaming
WebSocket API in `probe serve`.

Both share one endpointer, which hears nothing but loudness: a sample is voiced if its magnitude reaches
`VOICED_DBFS`. A turn starts at the first voiced sample after the last turn's end; its speech ends at the
last voiced sample, placed on the audio's own timeline as a speech-to-text service places it: the stream's
start on the server's clock (each message's arrival less the audio up to its end, the earliest of them:
the message the network and the client delayed least) plus the samples up to that one. That ASSUMES the
client sends audio at real-time pace, each message when its audio has been spoken (a message of the audio
[t, t + 20 ms) sent at t + 20 ms), as a telephone or a microphone does: a client that sends faster moves
the speech end earlier than it was, and the final sooner after the caller's real last word. A message more
than `PAUSE_S` later than the timeline says (a client that paused its stream, or fell behind) starts the
timeline again, from it: a later speech end, never an earlier one. The final transcript is due `final_ms` after the
speech end, on `loop.time()` (so a busy server is late by its own lag, never early); voiced audio before
then re-arms it. Partials: one when the voice starts, then one for each further `PARTIAL_EVERY_S` of
speech, each a longer prefix of the transcript. Any number of turns on one connection.

- `GET /stt/turns/websocket?model=ink-2&encoding=pcm_s16le|pcm_mulaw&sample_rate=N`: the messages of the
  `cartesia` SDK 4.2's `stt.auto_finalize` (types/stt/stt_auto_finalize_*.py): `connected`, then for each
  turn `turn.start`, `turn.update` (the cumulative transcript), `turn.end` (the final one). Binary messages
  are audio; `{"type": "close"}` ends the turn under way at once (the API processes buffered audio before
  it closes) and closes. A bad query is an `error` message (STTErrorResponse, status 422 as the
  TTS routes answer an invalid request) and a close.
- `GET /stream-transcription-websocket?language-code=..&media-encoding=pcm&sample-rate=N&X-Amz-...`: AWS
  event-stream frames both ways. AudioEvent frames carry PCM s16le (an empty one ends the stream: the turn
  under way gets its final, then the socket closes); TranscriptEvent frames carry `Transcript.Results`, one
  ResultId per turn, `IsPartial` true until the final. A request without `X-Amz-Signature` is a 403 (the
  signature itself is not checked: any keys do); a bad parameter is a BadRequestException frame and a close.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from aiohttp import WSMsgType, web

from sonic_deploy.audio import FULL_SCALE, SPEECH_THRESHOLD_DB, decode_samples
from sonic_deploy.client import cartesia_api, eventstream
from sonic_deploy.event_loop import call_precisely_at
from sonic_deploy.standins.shared import STANDINS

TRANSCRIPT = "I'd like to book a table for two tonight."
VOICED_DBFS = SPEECH_THRESHOLD_DB  # as the turn probe finds the end of speech in a file
PARTIAL_EVERY_S = 0.2
# A message of audio later than the stream's timeline says by more than this restarts the timeline.
PAUSE_S = 0.002
INK_ENCODINGS = ("pcm_s16le", "pcm_mulaw")
# Encodings the API takes (the SDK's STTEncoding) that the stand-in does not decode.
INK_OTHER_ENCODINGS = ("pcm_s32le", "pcm_f16le", "pcm_f32le", "pcm_alaw")
TRANSCRIBE_RATES = (8000, 16000, 22050, 24000, 32000, 44100, 48000)
_THRESHOLD = FULL_SCALE * 10 ** (VOICED_DBFS / 20)
_WIDTH = {"pcm_s16le": 2, "pcm_mulaw": 1}


@dataclass(frozen=True)
class SttConfig:
    final_ms: float = 300.0
    transcript: str = TRANSCRIPT
    api_key: str | None = None


@dataclass(frozen=True)
class TurnEvent:
    """`start` of a turn, a `partial` transcript, or the `final` one; times on the audio's own timeline."""

    kind: Literal["start", "partial", "final"]
    text: str
    turn: int
    start_s: float
    end_s: float


class Endpointer:
    """One connection's audio in; its turns' events out, to `deliver`, in order (module docstring)."""

    def __init__(
        self, encoding: str, sample_rate: int, config: SttConfig, deliver: Callable[[TurnEvent], None]
    ) -> None:
        self._encoding, self._rate, self._deliver = encoding, sample_rate, deliver
        self._width = _WIDTH[encoding]
        self._final_s = config.final_ms / 1000
        self._text = config.transcript
        self._words = config.transcript.split()
        self._loop = asyncio.get_running_loop()
        self._carry = b""
        self._samples = 0  # received so far
        # When the stream's first sample was spoken, on the server's clock: each message, sent when its
        # audio has been spoken, gives its arrival less the audio before its end; the earliest is the one
        # the network and the client delayed least. A message later than that by more than PAUSE_S starts
        # the timeline again (the client paused its stream, or fell behind): a later speech end, never an
        # earlier one.
        self._origin: float | None = None
        self._turn_start = 0  # the sample index of the turn's first voiced sample
        self._voiced_end = 0  # one past its last voiced sample
        self._partials = 0
        self._timer: asyncio.TimerHandle | None = None
        self.in_turn = False
        self.turns = 0

    def feed(self, data: bytes, arrived: float) -> None:
        """A message of audio, read at `arrived` (`loop.time()`)."""
        data = self._carry + data
        whole = len(data) - len(data) % self._width
        self._carry = data[whole:]
        samples = decode_samples(self._encoding, data[:whole])
        base = self._samples
        self._samples += len(samples)
        origin = arrived - self._samples / self._rate
        if self._origin is None or origin > self._origin + PAUSE_S:
            self._origin = origin
        else:
            self._origin = min(self._origin, origin)
        voiced = [i for i, value in enumerate(samples) if abs(value) >= _THRESHOLD]
        if not voiced:
            return
        if not self.in_turn:
            self.in_turn, self._partials = True, 0
            self.turns += 1
            self._turn_start = base + voiced[0]
            self._event("start", "")
        self._voiced_end = base + voiced[-1] + 1
        spoken_s = (self._voiced_end - self._turn_start) / self._rate
        while self._partials * PARTIAL_EVERY_S <= spoken_s:
            self._partials += 1
            self._event("partial", " ".join(self._words[: self._partials]))
        speech_end = self._origin + self._voiced_end / self._rate  # on the audio's own timeline
        if self._timer is not None:
            self._timer.cancel()
        self._timer = call_precisely_at(self._loop, speech_end + self._final_s, self._final)

    def _event(self, kind: Literal["start", "partial", "final"], text: str) -> None:
        start, end = self._turn_start / self._rate, self._voiced_end / self._rate
        self._deliver(TurnEvent(kind, text, self.turns, round(start, 3), round(end, 3)))

    def _final(self) -> None:
        self._timer = None
        if self.in_turn:
            self.in_turn = False
            self._event("final", self._text)

    def finish(self) -> None:
        """The audio has ended: the turn under way, if any, is final now."""
        if self._timer is not None:
            self._timer.cancel()
        self._final()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


async def _drain(
    outbox: asyncio.Queue[TurnEvent | None], send: Callable[[TurnEvent], Awaitable[None]]
) -> None:
    """Send each event as the endpointer queues it, until None; a client that went away ends it."""
    with contextlib.suppress(ConnectionError, RuntimeError):
        while (event := await outbox.get()) is not None:
            await send(event)


class RefusedError(Exception):
    """Audio the server will not read: `reply` (a protocol's error message) is sent, then the socket closes."""

    def __init__(self, reply: str | bytes) -> None:
        super().__init__("refused")
        self.reply = reply


async def _converse(
    socket: web.WebSocketResponse,
    endpointer: Endpointer,
    outbox: asyncio.Queue[TurnEvent | None],
    send: Callable[[TurnEvent], Awaitable[None]],
    audio_of: Callable[[WSMsgType, str | bytes], bytes | None],
) -> None:
    """Audio in until `audio_of` says the stream ended (None) or refuses it (RefusedError), the client closes,
    or it leaves; the turn under way is final at a clean end, dropped otherwise. Then the socket closes."""
    sender = asyncio.create_task(_drain(outbox, send))
    loop = asyncio.get_running_loop()
    ended, refusal = False, None
    try:
        async for message in socket:
            if message.type not in (WSMsgType.BINARY, WSMsgType.TEXT):
                break
            try:
                audio = audio_of(message.type, message.data)
            except RefusedError as refused:
                refusal = refused
                break
            if audio is None:
                ended = True
                break
            if audio:
                endpointer.feed(audio, loop.time())
    finally:
        if ended:
            endpointer.finish()
        else:
            endpointer.cancel()
        outbox.put_nowait(None)
        with contextlib.suppress(ConnectionError, RuntimeError):
            await sender
            if refusal is not None:
                await _reply(socket, refusal.reply)
            await socket.close()
        sender.cancel()


async def _reply(socket: web.WebSocketResponse, reply: str | bytes) -> None:
    if isinstance(reply, str):
        await socket.send_str(reply)
    else:
        await socket.send_bytes(reply)


def _given_key(request: web.Request) -> set[str]:
    bearer = request.headers.get("Authorization", "")
    given = {
        request.headers.get("X-API-Key"),
        bearer[7:].strip() if bearer[:7].lower() == "bearer " else None,
        request.query.get("api_key"),
    }
    return {key for key in given if key}


def _ink_query(query: Mapping[str, str]) -> tuple[str, int] | str:
    """(encoding, sample_rate), or what is wrong with the query."""
    encoding = query.get("encoding")
    if encoding in INK_OTHER_ENCODINGS:
        return f"encoding: {encoding} is not decoded by the stand-in; use {' or '.join(INK_ENCODINGS)}"
    if encoding not in INK_ENCODINGS:
        return f"encoding: {encoding!r} is not one of {', '.join(INK_ENCODINGS + INK_OTHER_ENCODINGS)}"
    rate = query.get("sample_rate", "")
    if not rate.isdigit() or not 8000 <= int(rate) <= 192000:
        return f"sample_rate: {rate or 'none'!r} is not a sample rate in Hz (8000-192000)"
    if not query.get("model"):
        return "model: a model is required (ink-2)"
    return encoding, int(rate)


async def ink_turns(request: web.Request) -> web.StreamResponse:
    """Cartesia Ink's `GET /stt/turns/websocket` (module docstring)."""
    config = request.app[STANDINS].stt
    request_id = uuid.uuid4().hex
    if config.api_key is not None and config.api_key not in _given_key(request):
        message = "a valid API key is required (X-API-Key, Authorization: Bearer or api_key)"
        body = cartesia_api.error_message(401, "Unauthorized", message, "unauthorized", None, request_id)
        del body["type"], body["done"]
        return web.json_response(body, status=401)
    socket = web.WebSocketResponse(max_msg_size=1 << 20, compress=False)
    await socket.prepare(request)
    await socket.send_str(json.dumps({"type": "connected", "request_id": request_id}))
    parsed = _ink_query(request.query)
    if isinstance(parsed, str):
        error = cartesia_api.error_message(
            422, "Invalid request", parsed, "invalid_request", None, request_id
        )
        del error["done"]
        with contextlib.suppress(ConnectionError, RuntimeError):
            await socket.send_str(json.dumps(error))
            await socket.close()
        return socket
    outbox: asyncio.Queue[TurnEvent | None] = asyncio.Queue()
    endpointer = Endpointer(*parsed, config, outbox.put_nowait)

    async def send(event: TurnEvent) -> None:
        kind = {"start": "turn.start", "partial": "turn.update", "final": "turn.end"}[event.kind]
        body = {"type": kind, "request_id": request_id}
        if event.kind != "start":
            body["transcript"] = event.text
        await socket.send_str(json.dumps(body))

    def audio_of(kind: WSMsgType, data: str | bytes) -> bytes | None:
        if kind == WSMsgType.BINARY:
            assert isinstance(data, bytes)
            return data
        try:
            command = json.loads(data)
        except ValueError:
            return b""  # not a command: ignored, as an unknown command is
        return None if isinstance(command, dict) and command.get("type") == "close" else b""

    await _converse(socket, endpointer, outbox, send, audio_of)
    return socket


_TRANSCRIPT_HEADERS = eventstream.encode_headers(
    {":message-type": "event", ":event-type": "TranscriptEvent", ":content-type": "application/json"}
)


def transcribe_exception(kind: str, message: str) -> bytes:
    """An exception frame as Transcribe sends one: `:exception-type` names it, the payload its Message."""
    headers = {":message-type": "exception", ":exception-type": kind, ":content-type": "application/json"}
    return eventstream.encode_frame(headers, json.dumps({"Message": message}).encode())


def _transcribe_query(query: Mapping[str, str]) -> int | str:
    """The sample rate, or what is wrong with the query (Transcribe's own words where known)."""
    if not query.get("language-code") and query.get("identify-language") != "true":
        return "A language code or identify-language is required."
    encoding = query.get("media-encoding")
    if encoding in ("ogg-opus", "flac"):
        return f"The stand-in does not decode {encoding}: use pcm (signed 16-bit little-endian)."
    if encoding != "pcm":
        return f"Invalid media-encoding {encoding!r}: the WebSocket API takes pcm, ogg-opus or flac."
    rate = query.get("sample-rate", "")
    if not rate.isdigit() or int(rate) not in TRANSCRIBE_RATES:
        return f"Invalid sample-rate {rate or 'none'!r}: use 8000 to 48000 Hz."
    return int(rate)


async def transcribe_stream(request: web.Request) -> web.StreamResponse:
    """Amazon Transcribe's `GET /stream-transcription-websocket` (module docstring)."""
    if not request.query.get("X-Amz-Signature"):
        return web.Response(
            status=403, text="Missing Authentication Token: presign the URL with SigV4 (X-Amz-Signature)."
        )
    config = request.app[STANDINS].stt
    socket = web.WebSocketResponse(max_msg_size=1 << 20, compress=False, protocols=("mqtt",))
    await socket.prepare(request)
    parsed = _transcribe_query(request.query)
    if isinstance(parsed, str):
        with contextlib.suppress(ConnectionError, RuntimeError):
            await socket.send_bytes(transcribe_exception("BadRequestException", parsed))
            await socket.close()
        return socket
    outbox: asyncio.Queue[TurnEvent | None] = asyncio.Queue()
    endpointer = Endpointer("pcm_s16le", parsed, config, outbox.put_nowait)
    decoder = eventstream.FrameDecoder()
    session = uuid.uuid4()

    async def send(event: TurnEvent) -> None:
        if event.kind == "start":
            return
        result = {
            "ResultId": f"{session}-{event.turn}",
            "StartTime": event.start_s,
            "EndTime": event.end_s,
            "IsPartial": event.kind == "partial",
            "Alternatives": [{"Transcript": event.text, "Items": []}],
            "ChannelId": "ch_0",
        }
        payload = json.dumps({"Transcript": {"Results": [result]}}).encode()
        await socket.send_bytes(eventstream.encode_frame(_TRANSCRIPT_HEADERS, payload))

    def audio_of(kind: WSMsgType, data: str | bytes) -> bytes | None:
        if kind == WSMsgType.TEXT:
            # pipecat sends `{"message-type": "event", "event": "end"}` as text before it closes: read
            # as the end of the stream, like an empty AudioEvent.
            return None
        assert isinstance(data, bytes)
        try:
            frames = decoder.feed(data)
        except eventstream.FrameError as error:
            message = f"Could not read an event-stream message: {error}"
            raise RefusedError(transcribe_exception("BadRequestException", message)) from error
        audio = b""
        for headers, payload in frames:
            if headers.get(":message-type") != "event" or headers.get(":event-type") != "AudioEvent":
                message = f"Expected an AudioEvent, got {headers.get(':event-type')!r}."
                raise RefusedError(transcribe_exception("BadRequestException", message))
            if not payload:
                return None
            audio += payload
        return audio

    await _converse(socket, endpointer, outbox, send, audio_of)
    return socket
