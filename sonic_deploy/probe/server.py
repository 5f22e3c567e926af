"""`sonic-deploy probe serve`: a local stand-in for the Cartesia API and for SageMaker's streaming invocation.

It measures the probe and the clients, not Sonic: every delay is one it was told to make. It follows the
Cartesia API as the official SDK describes it (sonic_deploy/client/cartesia_api.py names the files), and
the SageMaker route as docs/probe.md says:
- `GET /tts/websocket`: contexts multiplexed on one socket; a context continued over several messages
  (`continue: true`, then `continue: false`) is one audio stream with one `done`; `flush: true` answers
  `flush_done`; `{"context_id", "cancel": true}` stops a context's audio; word timestamps when asked.
- `POST /tts/bytes` (raw or WAV) and `POST /tts/sse` (server-sent events).
- `POST /endpoints/{name}/invocations-response-stream`: SageMaker's `InvokeEndpointWithResponseStream`,
  newline-terminated JSON in AWS event-stream frames that boto3 parses; one request per utterance.
- The turn's other hops (`llm_standin`, `stt_standin`): `POST /v1/chat/completions`, Cartesia Ink's
  `GET /stt/turns/websocket` and Amazon Transcribe's `GET /stream-transcription-websocket`.
With a certificate and key (`--tls-cert`, `--tls-key`), all of it over TLS: https:// and wss://.
Credentials: `X-API-Key`, `Authorization: Bearer`, or `?api_key=`; the API version (`Cartesia-Version`
or `?cartesia_version=`) and the credential form of each request, and the `model_id` of each stream, are
counted in `GET /stats`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import ssl
import struct
import uuid
from typing import Any

from aiohttp import WSMsgType, web

from sonic_deploy.client import cartesia_api, eventstream
from sonic_deploy.probe.bedrock_standin import converse, converse_stream
from sonic_deploy.probe.llm_standin import LLM, LlmConfig, chat_completions
from sonic_deploy.probe.reference_stream import (
    BadRequestError,
    Event,
    Generation,
    ReferenceBehaviour,
    ServerConfig,
    parse_request,
)
from sonic_deploy.probe.requests import BYTES_PER_SAMPLE, AudioFormat
from sonic_deploy.probe.stt_standin import STT, TRANSCRIPT, SttConfig, ink_turns, transcribe_stream

BEHAVIOUR = web.AppKey("behaviour", ReferenceBehaviour)
_STATUS_FAULTS = {"status500": 500, "status422": 422}
# Title and machine-readable code per status. The codes are the stand-in's own: Cartesia documents the
# fields (cartesia_api.error_message), not a list of values.
_ERRORS = {
    400: ("Bad request", "bad_request"),
    401: ("Unauthorized", "unauthorized"),
    422: ("Invalid request", "invalid_request"),
    429: ("Too many requests", "concurrency_limited"),
    500: ("Internal server error", "internal_error"),
}
_SENTENCE_ENDS = (".", "!", "?", ";", ":")
_MAX_VALUES = 16


def _abort(request: web.Request) -> None:
    """A connection reset mid-stream, as a crashed or restarted server would cause."""
    if request.transport is not None:
        request.transport.abort()


async def _status(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def _stats(request: web.Request) -> web.Response:
    behaviour = request.app[BEHAVIOUR]
    body = {"active": behaviour.active, **behaviour.counts, "first_byte_lateness_ms": behaviour.lateness_ms()}
    return web.json_response(body)


def _error_body(status: int, message: str, context_id: str | None, request_id: str) -> dict[str, Any]:
    title, code = _ERRORS.get(status, _ERRORS[500])
    return cartesia_api.error_message(status, title, message, code, context_id, request_id)


def _http_error(status: int, message: str) -> web.Response:
    body = _error_body(status, message, None, uuid.uuid4().hex)
    del body["type"], body["done"]
    return web.json_response(body, status=status)


def _count_value(behaviour: ReferenceBehaviour, kind: str, value: object) -> None:
    """Count `kind:value` in /stats (an API version, a model id); the counters stay few whatever clients
    send: past the first few values, or for a long one, `kind:other`."""
    text = value if isinstance(value, str) and value else "none"
    seen = sum(1 for name in behaviour.counts if name.startswith(f"{kind}:"))
    if f"{kind}:{text}" not in behaviour.counts and (seen >= _MAX_VALUES or len(text) > 32):
        text = "other"
    behaviour.counts[f"{kind}:{text}"] += 1


def _refused(request: web.Request, behaviour: ReferenceBehaviour) -> web.Response | None:
    """Count the API version and credential form; a 401 if the server wants a key and got another."""
    version = request.headers.get("Cartesia-Version") or request.query.get("cartesia_version")
    _count_value(behaviour, "version", version)
    bearer = request.headers.get("Authorization", "")
    given = {
        "x-api-key": request.headers.get("X-API-Key"),
        "bearer": bearer[7:].strip() if bearer[:7].lower() == "bearer " else None,
        "query": request.query.get("api_key"),
    }
    form = next((name for name, value in given.items() if value), "none")
    behaviour.counts[f"auth:{form}"] += 1
    key = behaviour.config.api_key
    if key is None or key in given.values():
        return None
    return _http_error(401, "a valid API key is required (X-API-Key, Authorization: Bearer or api_key)")


async def _websocket(request: web.Request) -> web.StreamResponse:
    behaviour = request.app[BEHAVIOUR]
    refusal = _refused(request, behaviour)
    if refusal is not None:
        return refusal
    socket = web.WebSocketResponse(max_msg_size=1 << 20, compress=False)
    await socket.prepare(request)
    behaviour.counts["ws_connections"] += 1
    session = _Socket(request, socket, behaviour)
    try:
        async for message in socket:
            if message.type != WSMsgType.TEXT:
                break
            await session.receive(message.data, asyncio.get_running_loop().time())
    finally:
        session.close()
    return socket


class _Socket:
    """One WebSocket: its open contexts by id, each fed by the messages sent for it."""

    def __init__(self, request: web.Request, socket: web.WebSocketResponse, behaviour: ReferenceBehaviour):
        self.request, self.socket, self.behaviour = request, socket, behaviour
        self.request_id = uuid.uuid4().hex  # the SDK's `request_id`: one per connection
        self.contexts: dict[str, _Context] = {}
        # Contexts that will say nothing more: cancelled by the client, refused, or failed. Clients send a
        # context's text and its closing message back to back; what follows a refusal is part of the
        # refused stream, not a new one. And contexts that completed (their `done` was sent).
        self.silenced = _RecentIds()
        self.completed = _RecentIds()

    async def send(self, text: str) -> None:
        await self.socket.send_str(text)

    async def error(self, status: int, message: str, context_id: str | None) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.send(json.dumps(_error_body(status, message, context_id, self.request_id)))

    async def receive(self, text: str, arrived: float) -> None:
        try:
            body = json.loads(text)
        except ValueError:
            await self.error(400, "the message is not JSON", None)
            return
        named = body.get("context_id") if isinstance(body, dict) else None
        context_id = named if isinstance(named, str) and named else None
        if isinstance(body, dict) and body.get("cancel") is True:
            await self._cancel(context_id)
            return
        try:
            generation = parse_request(body, require_context=True)
        except BadRequestError as error:
            await self.error(422, str(error), context_id)
            return
        context = self.contexts.get(generation.context_id)
        if context is None:
            if generation.context_id in self.silenced:
                return  # no stream left to join
            if generation.context_id in self.completed:
                await self.error(422, f"context {generation.context_id} has ended", generation.context_id)
                return
            _count_value(self.behaviour, "model", body.get("model_id"))  # once a stream: at its opening
            context = await self._open(generation)
            if context is None:
                return
        context.inbox.put_nowait((generation, arrived))

    async def _open(self, generation: Generation) -> _Context | None:
        fault = self.behaviour.admit()
        if fault is None or fault in _STATUS_FAULTS:
            self.silenced.add(generation.context_id)
            if fault is None:
                await self.error(429, "no free capacity", generation.context_id)
            else:
                self.behaviour.release(False)
                await self.error(_STATUS_FAULTS[fault], "injected fault", generation.context_id)
            return None
        context = _Context(self, generation, fault)
        self.contexts[generation.context_id] = context
        return context

    async def _cancel(self, context_id: str | None) -> None:
        if context_id is None:
            await self.error(422, "context_id: a cancel names the context to cancel", None)
            return
        self.silenced.add(context_id)
        context = self.contexts.pop(context_id, None)
        if context is not None:
            self.behaviour.counts["cancelled"] += 1
            context.task.cancel()

    def close(self) -> None:
        for context in list(self.contexts.values()):
            context.task.cancel()


class _RecentIds:
    """The last `keep` context ids added: a long-lived socket's memory of ended contexts stays bounded."""

    def __init__(self, keep: int = 10_000) -> None:
        self._ids: dict[str, None] = {}
        self._keep = keep

    def add(self, context_id: str) -> None:
        self._ids[context_id] = None
        if len(self._ids) > self._keep:
            del self._ids[next(iter(self._ids))]

    def __contains__(self, context_id: object) -> bool:
        return context_id in self._ids


class _Context:
    """One context's audio stream: pieces are spoken in order, each starting where the last one ended.

    Text of a continued context waits for more until it ends a sentence, or `max_buffer_delay_ms` (the
    documented default when a request names none) has passed since its first piece came; 0 speaks each
    piece at once. This is the stand-in's reading of the documented option, not Cartesia's algorithm."""

    def __init__(self, owner: _Socket, first: Generation, fault: str) -> None:
        self.owner, self.id, self.audio, self.fault = owner, first.context_id, first.audio, fault
        self.timestamps = first.timestamps
        self.delay_s = owner.behaviour.config.default_buffer_delay_ms / 1000
        self.inbox: asyncio.Queue[tuple[Generation, float]] = asyncio.Queue()
        self.not_before = 0.0
        self.spoken_s = 0.0
        self.first_piece = True
        self.flushes = 0
        self.completed = False
        self.task = asyncio.create_task(self._run())
        # Run even if the task is cancelled before its first step (a cancel or a close read in the same
        # buffer as the request), when a `finally` inside it would not: each admission released once.
        self.task.add_done_callback(self._ended)
        self._interval_ms = owner.behaviour.config.chunk_ms * owner.behaviour.config.pace
        self._tail = (
            f'", "done": false, "status_code": {cartesia_api.PARTIAL}, '
            f'"step_time": {self._interval_ms}, "context_id": {json.dumps(self.id)}}}'
        )

    async def _run(self) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self._stream()

    def _ended(self, task: asyncio.Task[None]) -> None:
        owner = self.owner
        if owner.contexts.get(self.id) is self:
            del owner.contexts[self.id]
            (owner.completed if self.completed else owner.silenced).add(self.id)
        owner.behaviour.release(self.completed)

    async def _stream(self) -> None:
        loop = asyncio.get_running_loop()
        pending: list[str] = []
        since = 0.0
        while True:
            timeout = None if not pending else max(0.0, since + self.delay_s - loop.time())
            try:
                piece, arrived = await asyncio.wait_for(self.inbox.get(), timeout)
            except TimeoutError:
                text, pending = _joined(pending), []
                if not await self._speak(text, since + self.delay_s):
                    return
                continue
            if piece.max_buffer_delay_ms is not None:
                self.delay_s = piece.max_buffer_delay_ms / 1000
            if not pending:
                since = arrived
            pending.append(piece.transcript)
            text = _joined(pending)
            if not (
                piece.flush or not piece.more or self.delay_s == 0 or text.rstrip().endswith(_SENTENCE_ENDS)
            ):
                continue
            pending = []
            if not await self._speak(text, arrived):
                return
            if piece.flush:
                self.flushes += 1
                await self.owner.send(
                    json.dumps(self._message("flush_done", flush_done=True, flush_id=self.flushes))
                )
            if not piece.more:
                await self.owner.send(cartesia_api.done_message(self.id))
                self.completed = True
                return

    def _message(self, kind: str, **fields: Any) -> dict[str, Any]:
        return {
            "type": kind,
            "context_id": self.id,
            "status_code": cartesia_api.PARTIAL,
            "done": False,
            **fields,
        }

    async def _speak(self, text: str, ready_at: float) -> bool:
        """Send one piece's audio; False if a fault ended the stream."""
        if not text.strip():
            return True
        behaviour, owner = self.owner.behaviour, self.owner
        fault = self.fault if self.first_piece else ""
        stamped = not self.timestamps
        events = behaviour.events(text, self.audio, fault, ready_at, self.not_before, self.first_piece)
        self.first_piece = False
        async for event in events:
            if event.kind == "chunk":
                await owner.send('{"type": "chunk", "data": "' + event.b64 + self._tail)
                if not stamped:  # a piece's word timestamps follow its first chunk
                    await owner.send(
                        json.dumps(self._message("timestamps", word_timestamps=self._words(text)))
                    )
                    stamped = True
            elif event.kind == "done":
                self.not_before = event.due
                self.spoken_s += behaviour.audio_ms(text) / 1000
            elif event.kind == "malformed":
                await owner.send(json.dumps(self._message("chunk", data="%%% not base64 %%%")))
            elif event.kind == "error":
                await owner.error(500, "injected error event", self.id)
                return False
            else:
                _abort(owner.request)
                return False
        return True

    def _words(self, text: str) -> dict[str, list[Any]]:
        """Word timestamps for a piece: its words spread evenly over its audio, after what came before."""
        words = text.split()
        step = self.owner.behaviour.audio_ms(text) / 1000 / max(1, len(words))
        starts = [round(self.spoken_s + i * step, 3) for i in range(len(words))]
        return {"words": words, "start": starts, "end": [round(s + step, 3) for s in starts]}


def _joined(pieces: list[str]) -> str:
    """Pieces as one text: pipecat sends sentences trimmed, LiveKit with a trailing space."""
    text = ""
    for piece in pieces:
        space = text and piece and not text[-1].isspace() and not piece[0].isspace()
        text += (" " if space else "") + piece
    return text


def _wav_header(audio: AudioFormat, data_bytes: int) -> bytes:
    """A RIFF header for `data_bytes` of mono audio (the stand-in knows a stream's length before it starts).
    PCM has a 16-byte `fmt ` chunk; float and G.711 have an 18-byte one and a `fact` chunk, as the RIFF
    format asks of any format but PCM."""
    code = {"pcm_s16le": 1, "pcm_f32le": 3, "pcm_mulaw": 7, "pcm_alaw": 6}[audio.encoding]
    width = BYTES_PER_SAMPLE[audio.encoding]
    rate = audio.sample_rate
    fmt = struct.pack("<HHIIHH", code, 1, rate, rate * width, width, width * 8)
    chunks = [b"fmt " + struct.pack("<I", len(fmt)) + fmt]
    if code != 1:
        fmt += struct.pack("<H", 0)
        chunks = [
            b"fmt " + struct.pack("<I", len(fmt)) + fmt,
            b"fact" + struct.pack("<II", 4, data_bytes // width),
        ]
    body = b"WAVE" + b"".join(chunks) + b"data" + struct.pack("<I", data_bytes)
    return b"RIFF" + struct.pack("<I", len(body) + data_bytes) + body


async def _http_request(
    request: web.Request, containers: tuple[str, ...]
) -> tuple[Generation, str, float] | web.Response:
    """The parsed request and its fault, or the response that refuses it."""
    arrived = asyncio.get_running_loop().time()
    behaviour = request.app[BEHAVIOUR]
    refusal = _refused(request, behaviour)
    if refusal is not None:
        return refusal
    try:
        body = await request.json()
        generation = parse_request(body, require_context=False, containers=containers)
    except (ValueError, BadRequestError) as error:
        return _http_error(422, str(error))
    _count_value(behaviour, "model", body.get("model_id"))
    fault = behaviour.admit()
    if fault is None:
        return _http_error(429, "no free capacity")
    if fault in _STATUS_FAULTS:
        behaviour.release(False)
        return _http_error(_STATUS_FAULTS[fault], "injected fault")
    return generation, fault, arrived


async def _bytes(request: web.Request) -> web.StreamResponse:
    parsed = await _http_request(request, cartesia_api.CONTAINERS)
    if isinstance(parsed, web.Response):
        return parsed
    generation, fault, arrived = parsed
    behaviour = request.app[BEHAVIOUR]
    completed = False
    try:
        wav = generation.container == "wav"
        response = web.StreamResponse(
            headers={"Content-Type": "audio/wav" if wav else "application/octet-stream"}
        )
        await response.prepare(request)
        if wav:
            await response.write(
                _wav_header(generation.audio, behaviour.stream_bytes(generation.transcript, generation.audio))
            )
        async for event in behaviour.events(generation.transcript, generation.audio, fault, arrived):
            if event.kind == "chunk":
                await response.write(event.audio)
            elif event.kind == "done":
                await response.write_eof()
                completed = True
            elif event.kind != "malformed":
                # Raw bytes cannot carry an error event: a failed stream is a cut stream.
                _abort(request)
                return response
        return response
    except ConnectionResetError:  # the client went away; nothing to answer
        return web.Response(status=499)
    finally:
        behaviour.release(completed)


async def _sse(request: web.Request) -> web.StreamResponse:
    parsed = await _http_request(request, ("raw",))
    if isinstance(parsed, web.Response):
        return parsed
    generation, fault, arrived = parsed
    behaviour = request.app[BEHAVIOUR]
    completed = False
    interval_ms = behaviour.config.chunk_ms * behaviour.config.pace

    named = {"context_id": generation.context_id} if generation.context_id else {}

    async def send(kind: str, **fields: Any) -> None:
        message = {"type": kind, "done": False, "status_code": cartesia_api.PARTIAL, **named, **fields}
        await response.write(f"event: {kind}\ndata: {json.dumps(message)}\n\n".encode())

    try:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        first = True
        async for event in behaviour.events(generation.transcript, generation.audio, fault, arrived):
            if event.kind == "chunk":
                await send("chunk", data=event.b64, step_time=interval_ms)
                if first and generation.timestamps:
                    words = generation.transcript.split()
                    step = behaviour.audio_ms(generation.transcript) / 1000 / max(1, len(words))
                    starts = [round(i * step, 3) for i in range(len(words))]
                    stamps = {"words": words, "start": starts, "end": [round(s + step, 3) for s in starts]}
                    await send("timestamps", word_timestamps=stamps)
                first = False
            elif event.kind == "done":
                await send("done", done=True, status_code=cartesia_api.COMPLETE)
                await response.write_eof()
                completed = True
            elif event.kind == "malformed":
                await send("chunk", data="%%% not base64 %%%", step_time=interval_ms)
            elif event.kind == "error":
                body = _error_body(500, "injected error event", None, uuid.uuid4().hex)
                await response.write(f"event: error\ndata: {json.dumps(body)}\n\n".encode())
                await response.write_eof()
                return response
            else:
                _abort(request)
                return response
        return response
    except ConnectionResetError:
        return web.Response(status=499)
    finally:
        behaviour.release(completed)


def _model_error(status: int, message: str) -> web.Response:
    """What boto3 turns into `ModelError` with `OriginalStatusCode`."""
    body = {
        "OriginalStatusCode": status,
        "OriginalMessage": message,
        "message": f'Received client error ({status}) from primary with message "{message}".',
        "LogStreamArn": "arn:aws:logs:us-east-1:000000000000:log-group:/aws/sagemaker/Endpoints/reference",
    }
    return web.json_response(body, status=424, headers={"x-amzn-ErrorType": "ModelError:http://internal"})


def _sagemaker_request(body: Any) -> Generation:
    """The Marketplace container's body (docs/probe.md): a voice object, a context id, no continuations."""
    generation = parse_request(body, require_context=True)
    if not isinstance(body.get("voice"), dict):
        raise BadRequestError('voice must be {"mode": "id", "id": ...} on this route')
    if generation.more or generation.flush:
        raise BadRequestError("this route takes one request per utterance: no continue, no flush")
    return generation


async def _sagemaker(request: web.Request) -> web.StreamResponse:
    arrived = asyncio.get_running_loop().time()
    behaviour = request.app[BEHAVIOUR]
    # Not checked (any keys sign): counted by access key id, so a client's credential refresh shows.
    signed = request.headers.get("Authorization", "").partition("Credential=")[2].partition("/")[0]
    _count_value(behaviour, "access_key", signed)
    try:
        generation = _sagemaker_request(await request.json())
    except (ValueError, BadRequestError) as error:
        return _model_error(422, str(error))
    fault = behaviour.admit()
    if fault is None:
        return _model_error(429, "no free capacity")
    completed = False
    try:
        if fault in _STATUS_FAULTS:
            return _model_error(_STATUS_FAULTS[fault], "injected fault")
        response = web.StreamResponse(
            headers={
                "Content-Type": eventstream.CONTENT_TYPE,
                "X-Amzn-Invoked-Production-Variant": "AllTraffic",
            }
        )
        await response.prepare(request)
        parts = _PartWriter(response, behaviour.config.parts)
        lines = _SageMakerLines(generation, behaviour.config.chunk_ms * behaviour.config.pace / 1000)
        async for event in behaviour.events(generation.transcript, generation.audio, fault, arrived):
            completed = event.kind == "done"
            if event.kind == "reset":
                _abort(request)
                return response
            if event.kind == "stream_error":
                await parts.flush()
                await response.write(
                    eventstream.stream_exception("ModelStreamError", "injected stream error")
                )
                return response
            await parts.add(lines.line(event), final=event.kind in ("done", "error"))
        await response.write_eof()
        return response
    except ConnectionResetError:  # the client went away; nothing to answer
        return web.Response(status=499)
    finally:
        behaviour.release(completed)


class _SageMakerLines:
    """The newline-terminated JSON events of one stream: `step_time` in seconds and `sampling_rate` on
    each chunk, as Cartesia's SageMaker notebooks show (domain.md, section 1)."""

    def __init__(self, generation: Generation, step_s: float) -> None:
        self.context_id = generation.context_id
        # Thousands of these a second: built by hand, not through json.dumps (base64 needs no escaping).
        self._tail = (
            f'", "done": false, "status_code": {cartesia_api.PARTIAL}, "step_time": {step_s}, '
            f'"sampling_rate": {generation.audio.sample_rate}, "context_id": {json.dumps(self.context_id)}}}\n'
        ).encode()

    def line(self, event: Event) -> bytes:
        if event.kind == "malformed":
            return b'{"type": "chunk", "data": \n'
        if event.kind == "chunk":
            return b'{"type": "chunk", "data": "' + event.b64.encode() + self._tail
        if event.kind == "error":
            body = _error_body(500, "injected error event", self.context_id, uuid.uuid4().hex)
            return json.dumps(body).encode() + b"\n"
        return cartesia_api.done_message(self.context_id).encode() + b"\n"


class _PartWriter:
    """Lays JSON lines out in `PayloadPart`s: one per part, split over parts, packed, or cut anywhere."""

    MIXED_PART_BYTES = 1000
    PACK = 3

    def __init__(self, response: web.StreamResponse, layout: str) -> None:
        self._response, self._layout = response, layout
        self._held: list[bytes] = []
        self._tail = b""

    async def add(self, line: bytes, final: bool) -> None:
        if self._layout == "split":
            third = max(1, len(line) // 3)
            for piece in (line[:third], line[third : 2 * third], line[2 * third :]):
                await self._send(piece)
        elif self._layout == "packed":
            self._held.append(line)
            if len(self._held) >= self.PACK or final:
                await self.flush()
        elif self._layout == "mixed":
            data = self._tail + line
            cut = len(data) - len(data) % self.MIXED_PART_BYTES
            for offset in range(0, cut, self.MIXED_PART_BYTES):
                await self._send(data[offset : offset + self.MIXED_PART_BYTES])
            self._tail = data[cut:]
            if final:
                await self.flush()
        else:
            await self._send(line)

    async def flush(self) -> None:
        data, self._held, self._tail = b"".join(self._held) + self._tail, [], b""
        await self._send(data)

    async def _send(self, data: bytes) -> None:
        if data:
            await self._response.write(eventstream.payload_part(data))


def build_app(config: ServerConfig) -> web.Application:
    app = web.Application(client_max_size=1 << 20)
    app[BEHAVIOUR] = ReferenceBehaviour(config)
    app.router.add_get("/status", _status)
    app.router.add_get("/stats", _stats)
    app.router.add_get("/tts/websocket", _websocket)
    app.router.add_post("/tts/bytes", _bytes)
    app.router.add_post("/tts/sse", _sse)
    app.router.add_post("/endpoints/{name}/invocations-response-stream", _sagemaker)
    app[LLM] = LlmConfig(config.llm_first_token_ms, config.llm_tokens_per_s)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/model/{model_id}/converse-stream", converse_stream)
    app.router.add_post("/model/{model_id}/converse", converse)
    app[STT] = SttConfig(config.stt_final_ms, config.stt_transcript or TRANSCRIPT, config.api_key)
    app.router.add_get("/stt/turns/websocket", ink_turns)
    app.router.add_get("/stream-transcription-websocket", transcribe_stream)
    return app


def tls_context(config: ServerConfig) -> ssl.SSLContext | None:
    """The server side of TLS for `tls_cert` and `tls_key`, or None for plain HTTP. Raises OSError for a
    file it cannot read, ssl.SSLError for one that is not a PEM certificate chain or its key."""
    if config.tls_cert is None or config.tls_key is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    # An encrypted key is refused rather than prompted for: the server runs unattended.
    context.load_cert_chain(config.tls_cert, config.tls_key, password=lambda: b"")
    return context


async def serve(config: ServerConfig) -> None:
    """Serve until SIGINT/SIGTERM or `exit_after_s`; print the bound address first (tests read it):
    `listening on http://HOST:PORT`, or https:// with TLS (then its WebSocket is wss://)."""
    runner = web.AppRunner(build_app(config), access_log=None, handle_signals=False)
    await runner.setup()
    tls = tls_context(config)
    site = web.TCPSite(runner, config.host, config.port, backlog=1024, reuse_address=True, ssl_context=tls)
    await site.start()
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    port = sockets[0].getsockname()[1] if sockets else config.port
    print(f"listening on {'https' if tls else 'http'}://{config.host}:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=config.exit_after_s)
    await runner.cleanup()
