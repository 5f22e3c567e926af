"""`sonic-deploy probe serve`: a local stand-in speaking the three wire formats the probe measures.

It measures the probe, not Sonic. Protocols: Cartesia WebSocket (`/tts/websocket`), streamed bytes
(`POST /tts/bytes`), and SageMaker's `InvokeEndpointWithResponseStream`
(`POST /endpoints/{name}/invocations-response-stream`, AWS event-stream frames that boto3 parses).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from typing import Any

from aiohttp import WSMsgType, web

from sonic_deploy.probe import eventstream
from sonic_deploy.probe.reference_stream import (
    BadRequestError,
    Event,
    ReferenceBehaviour,
    ServerConfig,
    parse_request,
)

BEHAVIOUR = web.AppKey("behaviour", ReferenceBehaviour)
_STATUS_FAULTS = {"status500": 500, "status422": 422}


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


def _authorised(request: web.Request, behaviour: ReferenceBehaviour) -> bool:
    key = behaviour.config.api_key
    return key is None or request.headers.get("X-API-Key", request.query.get("api_key")) == key


async def _websocket(request: web.Request) -> web.StreamResponse:
    behaviour = request.app[BEHAVIOUR]
    if not _authorised(request, behaviour):
        return web.json_response({"error": "unauthorised"}, status=401)
    socket = web.WebSocketResponse(max_msg_size=1 << 20, compress=False)
    await socket.prepare(request)
    tasks: set[asyncio.Task[None]] = set()
    async for message in socket:
        if message.type != WSMsgType.TEXT:
            break
        arrived = asyncio.get_running_loop().time()
        task = asyncio.create_task(_ws_context(request, socket, behaviour, message.data, arrived))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    for task in list(tasks):
        task.cancel()
    return socket


async def _ws_context(
    request: web.Request,
    socket: web.WebSocketResponse,
    behaviour: ReferenceBehaviour,
    text: str,
    arrived: float,
) -> None:
    context_id = ""
    try:
        body = json.loads(text)
        context_id = str(body.get("context_id", "")) if isinstance(body, dict) else ""
        transcript, audio, context_id = parse_request(body, require_context=True)
    except (ValueError, BadRequestError) as error:
        await _ws_error(socket, context_id, 422, str(error))
        return
    fault = behaviour.admit()
    if fault is None:
        await _ws_error(socket, context_id, 429, "no free capacity")
        return
    completed = False
    try:
        if fault in _STATUS_FAULTS:
            await _ws_error(socket, context_id, _STATUS_FAULTS[fault], "injected fault")
            return
        # The same message shape thousands of times a second: build it by hand, not through json.dumps.
        chunk_tail = f'", "done": false, "context_id": {json.dumps(context_id)}}}'
        async for event in behaviour.events(transcript, audio, fault, arrived):
            if event.kind == "chunk":
                await socket.send_str('{"type": "chunk", "data": "' + event.b64 + chunk_tail)
            elif event.kind == "done":
                await socket.send_str(json.dumps({"type": "done", "done": True, "context_id": context_id}))
                completed = True
            elif event.kind == "malformed":
                bad = {"type": "chunk", "data": "%%% not base64 %%%", "done": False, "context_id": context_id}
                await socket.send_str(json.dumps(bad))
            elif event.kind == "error":
                await _ws_error(socket, context_id, 500, "injected error event")
            else:
                _abort(request)
    except (ConnectionError, RuntimeError):
        pass
    finally:
        behaviour.release(completed)


async def _ws_error(socket: web.WebSocketResponse, context_id: str, status: int, text: str) -> None:
    with contextlib.suppress(ConnectionError, RuntimeError):
        message = {
            "type": "error",
            "error": text,
            "status_code": status,
            "done": True,
            "context_id": context_id,
        }
        await socket.send_str(json.dumps(message))


async def _bytes(request: web.Request) -> web.StreamResponse:
    arrived = asyncio.get_running_loop().time()
    behaviour = request.app[BEHAVIOUR]
    if not _authorised(request, behaviour):
        return web.json_response({"error": "unauthorised"}, status=401)
    try:
        transcript, audio, _ = parse_request(await request.json(), require_context=False)
    except (ValueError, BadRequestError) as error:
        return web.json_response({"error": str(error)}, status=422)
    fault = behaviour.admit()
    if fault is None:
        return web.json_response({"error": "no free capacity"}, status=429)
    completed = False
    try:
        if fault in _STATUS_FAULTS:
            return web.json_response({"error": "injected fault"}, status=_STATUS_FAULTS[fault])
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        await response.prepare(request)
        async for event in behaviour.events(transcript, audio, fault, arrived):
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


def _model_error(status: int, message: str) -> web.Response:
    """What boto3 turns into `ModelError` with `OriginalStatusCode`."""
    body = {
        "OriginalStatusCode": status,
        "OriginalMessage": message,
        "message": f'Received client error ({status}) from primary with message "{message}".',
        "LogStreamArn": "arn:aws:logs:us-east-1:000000000000:log-group:/aws/sagemaker/Endpoints/reference",
    }
    return web.json_response(body, status=424, headers={"x-amzn-ErrorType": "ModelError:http://internal"})


async def _sagemaker(request: web.Request) -> web.StreamResponse:
    arrived = asyncio.get_running_loop().time()
    behaviour = request.app[BEHAVIOUR]
    try:
        transcript, audio, context_id = parse_request(await request.json(), require_context=True)
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
        async for event in behaviour.events(transcript, audio, fault, arrived):
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
            await parts.add(_ndjson(event, context_id), final=event.kind in ("done", "error"))
        await response.write_eof()
        return response
    except ConnectionResetError:  # the client went away; nothing to answer
        return web.Response(status=499)
    finally:
        behaviour.release(completed)


def _ndjson(event: Event, context_id: str) -> bytes:
    if event.kind == "malformed":
        return b'{"type": "chunk", "data": \n'
    message: dict[str, Any]
    if event.kind == "chunk":
        # Thousands of these a second: built by hand, not through json.dumps (base64 needs no escaping).
        tail = f'", "done": false, "step_time": 0.0, "context_id": {json.dumps(context_id)}}}\n'
        return ('{"type": "chunk", "data": "' + event.b64 + tail).encode()
    if event.kind == "error":
        message = {
            "type": "error",
            "error": "injected error event",
            "status_code": 500,
            "context_id": context_id,
        }
    else:
        message = {"type": "done", "done": True, "context_id": context_id}
    return json.dumps(message).encode() + b"\n"


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
    app.router.add_post("/endpoints/{name}/invocations-response-stream", _sagemaker)
    return app


async def serve(config: ServerConfig) -> None:
    """Serve until SIGINT/SIGTERM or `exit_after_s`; print the bound address first (tests read it)."""
    runner = web.AppRunner(build_app(config), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port, backlog=1024, reuse_address=True)
    await site.start()
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    port = sockets[0].getsockname()[1] if sockets else config.port
    print(f"listening on http://{config.host}:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=config.exit_after_s)
    await runner.cleanup()
