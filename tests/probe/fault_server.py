"""A server that misbehaves on purpose, one named fault per URL, on the probe's three routes.

`FAULTS[route]` maps each fault to the error kind the probe must count for it (`None`: a whole utterance,
`ok`). The fault travels in the URL (`?fault=NAME` on the WebSocket and HTTP routes, the endpoint's name on
SageMaker), so that one target is built per fault and every request it sends meets the same fault. A
fault that must stop a request by its deadline leaves the request waiting ("slow_*"): the client's timeout
bounds it, never a timer here (so do the faults whose request never gets a message of its own,
expected as `timeout`). `MULTIPLEXED` are the WebSocket faults for a socket carrying several
contexts: the server waits until `CONTEXTS` have arrived, then sends what no context can own. A client that
builds the WebSocket path itself (the SDK) takes `http://HOST:PORT/fault/NAME` as its base URL.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import WSMsgType, web

from sonic_deploy.client import eventstream

PCM = b"\x10\x00" * 441  # 10 ms of 44.1 kHz pcm_s16le, what RequestTemplate() asks for
AUDIO = base64.b64encode(PCM).decode()
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 24 + PCM  # a WAV file where raw audio was asked for
CONTEXTS = 3

_STATUS = {"429": 429, "422": 422, "400": 400, "401": 401, "404": 404, "500": 500, "503": 503}

WS_FAULTS: dict[str, str | None] = {
    "none": None,
    "chunk_done_true": None,  # the last chunk says `done: true` and no done follows
    "binary_json": None,  # the SDK reads binary frames as JSON too (recv(decode=False), json.loads)
    "duplicate_done": None,
    "chunk_after_done": None,
    "timestamps_and_unknown_types": None,
    "done_without_audio": "no_audio",
    "empty_chunks": "no_audio",
    "timestamps_only": "no_audio",
    "truncated_json": "malformed",
    "binary_garbage": "malformed",
    "json_not_an_object": "malformed",
    "bad_base64": "malformed",
    "chunk_without_data": "malformed",
    "wav_header": "malformed",
    "partial_sample": "malformed",
    # On a dedicated socket, a message for another context (or none) is dropped, as the SDK drops it, and
    # counted (`foreign_messages`): the request ends on its own messages, or by its deadline without them.
    "wrong_context_id": "timeout",
    "no_context_id": "timeout",
    "foreign_then_own": None,
    "error_429": "error_event_429",
    "error_422": "error_event_422",
    "error_500": "error_event_5xx",
    "error_without_status": "error_event",
    "error_status_true": "error_event",
    "error_after_audio": "error_event_5xx",
    "error_without_context_id": "error_event_429",  # the one waiting context's (docs/probe.md)
    "error_without_context_id_after_audio": "error_event_429",  # the one open context's, status kept
    "close_1000": "cut",
    "close_1001": "cut",
    "close_1011": "cut",
    "close_4000": "cut",
    "close_1013": "closed_1013",
    "close_1013_at_once": "closed_1013",
    "reset": "cut",
    "reset_at_once": "cut",
    "handshake_429": "status_429",
    "handshake_429_empty": "status_429",
    "handshake_401": "status_4xx",
    "handshake_404_empty": "status_4xx",
    "handshake_500": "status_5xx",
    "handshake_503_empty": "status_5xx",
    "slow_first_byte": "timeout",
    "slow_after_audio": "timeout",
}

MULTIPLEXED: dict[str, str | None] = {
    "none": None,
    "unknown_context_id": "unattributed",
    "no_context_id": "unattributed",
    "truncated_json": "malformed",
    "binary_garbage": "malformed",
    "close_1013": "closed_1013",
    "close_1011": "cut",
}

HTTP_FAULTS: dict[str, str | None] = {
    "none": None,
    "many_small_chunks": None,
    "empty_200": "no_audio",
    "wav_header": "malformed",
    "wav_header_in_pieces": "malformed",
    "partial_sample": "malformed",
    "json_200": "malformed",
    "html_200": "malformed",
    "html_200_endless": "malformed",  # only the start of a body that is not audio is read
    "truncated_body": "cut",
    "reset_mid_body": "cut",
    "reset_at_once": "cut",
    "status_429": "status_429",
    "status_429_empty": "status_429",
    "status_422": "status_422",
    "status_400_empty": "status_4xx",
    "status_401": "status_4xx",
    "status_404_empty": "status_4xx",
    "status_500": "status_5xx",
    "status_503_empty": "status_5xx",
    "status_503_endless": "status_5xx",
    "status_204": "status_2xx",
    "slow_first_byte": "timeout",
    "slow_after_audio": "timeout",
}

SAGEMAKER_FAULTS: dict[str, str | None] = {
    "none": None,
    "duplicate_done": None,
    "chunk_after_done": None,
    "done_without_audio": "no_audio",
    "empty_chunks": "no_audio",
    "no_done": "cut",
    "empty_stream": "cut",
    "truncated_json": "malformed",
    "bad_base64": "malformed",
    "wav_header": "malformed",
    "partial_sample": "malformed",
    "error_event_500": "error_event_5xx",
    "error_event_429": "error_event_429",
    "model_error_429": "model_error_429",
    "model_error_422": "model_error_422",
    "model_error_500": "model_error_5xx",
    "stream_error": "model_stream_error",
    "reset_mid_stream": "cut",
    "slow_first_byte": "timeout",
}

FAULTS = {"ws": WS_FAULTS, "http": HTTP_FAULTS, "sagemaker": SAGEMAKER_FAULTS}


def chunk(context_id: str | None, data: object = AUDIO, **extra: Any) -> str:
    message: dict[str, Any] = {"type": "chunk", "data": data, "done": False, "status_code": 206, **extra}
    if context_id is not None:
        message["context_id"] = context_id
    return json.dumps(message)


def done(context_id: str | None) -> str:
    message: dict[str, Any] = {"type": "done", "done": True, "status_code": 200}
    if context_id is not None:
        message["context_id"] = context_id
    return json.dumps(message)


def error(context_id: str | None, status: int | None) -> str:
    message: dict[str, Any] = {"type": "error", "done": True, "title": "Injected", "message": "a fault"}
    if status is not None:
        message["status_code"] = status
    if context_id is not None:
        message["context_id"] = context_id
    return json.dumps(message)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def _forever() -> None:
    """What a silent server does: nothing, until the client gives up and the handler is cancelled."""
    await asyncio.Event().wait()


def _events(fault: str, context_id: str) -> list[str | bytes] | None:
    """The messages of one context for a fault that only changes what is said; None for the others."""
    scripts: dict[str, list[str | bytes]] = {
        "none": [chunk(context_id), chunk(context_id), done(context_id)],
        "chunk_done_true": [chunk(context_id), chunk(context_id, done=True)],
        "binary_json": [chunk(context_id).encode(), done(context_id).encode()],
        "duplicate_done": [chunk(context_id), done(context_id), done(context_id)],
        "chunk_after_done": [chunk(context_id), done(context_id), chunk(context_id)],
        "timestamps_and_unknown_types": [
            json.dumps({"type": "timestamps", "context_id": context_id, "done": False}),
            chunk(context_id),
            json.dumps({"type": "prosody", "context_id": context_id, "done": False}),
            done(context_id),
        ],
        "done_without_audio": [done(context_id)],
        "empty_chunks": [chunk(context_id, ""), chunk(context_id, ""), done(context_id)],
        "timestamps_only": [json.dumps({"type": "timestamps", "context_id": context_id}), done(context_id)],
        "truncated_json": [chunk(context_id), chunk(context_id)[:25], done(context_id)],
        "binary_garbage": [chunk(context_id), b"\x00\xff\x10 not an event", done(context_id)],
        "json_not_an_object": [chunk(context_id), json.dumps([chunk(context_id)]), done(context_id)],
        "bad_base64": [chunk(context_id, "not base64!"), done(context_id)],
        "chunk_without_data": [chunk(context_id, None), done(context_id)],
        "wav_header": [chunk(context_id, _b64(WAV)), done(context_id)],
        "partial_sample": [chunk(context_id, _b64(PCM + b"\x01")), done(context_id)],
        "wrong_context_id": [chunk("someone-else"), done("someone-else")],
        "no_context_id": [chunk(None), done(None)],
        "foreign_then_own": [chunk("someone-else"), chunk(context_id), done(context_id)],
        "error_429": [error(context_id, 429)],
        "error_422": [error(context_id, 422)],
        "error_500": [error(context_id, 500)],
        "error_without_status": [error(context_id, None)],
        "error_status_true": [error(context_id, True)],
        "error_after_audio": [chunk(context_id), error(context_id, 500)],
        "error_without_context_id": [error(None, 429)],
        "error_without_context_id_after_audio": [chunk(context_id), error(None, 429)],
    }
    return scripts.get(fault)


async def _websocket(request: web.Request) -> web.StreamResponse:
    fault = request.match_info.get("fault") or request.query.get("fault", "none")
    if fault.startswith("handshake_"):
        status = _STATUS[fault.split("_")[1]]
        text = None if fault.endswith("_empty") else json.dumps({"error": "injected", "status": status})
        return web.Response(status=status, text=text)
    socket = web.WebSocketResponse()
    await socket.prepare(request)
    if request.query.get("multiplexed"):
        await _multiplexed(socket, fault)
        return socket
    answered: set[str] = set()
    async for message in socket:
        if message.type is not WSMsgType.TEXT:
            break
        body = json.loads(message.data)
        context_id = str(body["context_id"])
        if body.get("cancel") or context_id in answered:
            continue  # a context is answered at its first piece (an agent sends several)
        answered.add(context_id)
        if not await _answer(request, socket, fault, context_id):
            break
    return socket


async def _answer(request: web.Request, socket: web.WebSocketResponse, fault: str, context_id: str) -> bool:
    """One context's answer under `fault`; False once the socket is gone."""
    script = _events(fault, context_id)
    if script is not None:
        for event in script:
            await (socket.send_bytes(event) if isinstance(event, bytes) else socket.send_str(event))
        return True
    if fault.startswith("close_"):
        if not fault.endswith("_at_once"):
            await socket.send_str(chunk(context_id))
        await socket.close(code=int(fault.split("_")[1]), message=b"injected")
        return False
    if fault.startswith("reset"):
        if fault != "reset_at_once":
            await socket.send_str(chunk(context_id))
        assert request.transport is not None
        request.transport.abort()
        return False
    if fault == "slow_after_audio":
        await socket.send_str(chunk(context_id))
    await _forever()  # slow_first_byte, slow_after_audio
    return False


async def _multiplexed(socket: web.WebSocketResponse, fault: str) -> None:
    """Answer contexts in groups of CONTEXTS: one chunk each, then the fault, then done for each."""
    waiting: list[str] = []
    async for message in socket:
        body = json.loads(message.data)
        if body.get("cancel"):
            continue
        waiting.append(str(body["context_id"]))
        if len(waiting) < CONTEXTS:
            continue
        group, waiting = waiting, []
        for context_id in group:
            await socket.send_str(chunk(context_id))
        if fault == "unknown_context_id":
            await socket.send_str(chunk("nobody-sent-this"))
        elif fault == "no_context_id":
            await socket.send_str(chunk(None))
        elif fault == "truncated_json":
            await socket.send_str(chunk(group[0])[:25])
        elif fault == "binary_garbage":
            await socket.send_bytes(b"\x00\xff garbage")
        elif fault.startswith("close_"):
            await socket.close(code=int(fault.split("_")[1]), message=b"injected")
            return
        for context_id in group:
            await socket.send_str(done(context_id))


async def _endless(request: web.Request, status: int) -> web.StreamResponse:
    """A page far longer than anyone should read (16 MB), then silence: a client that reads it all waits
    for its deadline."""
    response = web.StreamResponse(status=status, headers={"Content-Type": "text/html"})
    await response.prepare(request)
    try:
        for _ in range(16 * 1024):
            await response.write(b"<p>" + b"x" * 1017 + b"</p>")
            await asyncio.sleep(0)  # the client shares this event loop
        await _forever()
    except ConnectionResetError:  # the client read what it wanted and closed the connection
        pass
    return response


async def _bytes(request: web.Request) -> web.StreamResponse:
    fault = request.query.get("fault", "none")
    await request.read()
    if fault.endswith("_endless"):
        return await _endless(request, 200 if fault.startswith("html_200") else _STATUS["503"])
    if fault.startswith("status_"):
        status = _STATUS.get(fault.split("_")[1], 204)
        if status == 204 or fault.endswith("_empty"):
            return web.Response(status=int(fault.split("_")[1]))
        return web.json_response({"error": "injected", "status": status}, status=status)
    if fault == "json_200":
        return web.json_response({"type": "error", "message": "an error said with a 200"})
    if fault == "html_200":
        return web.Response(text="<html>Sign in to the proxy</html>", content_type="text/html")
    if fault == "reset_at_once":
        assert request.transport is not None
        request.transport.abort()
        return web.Response()
    if fault == "slow_first_byte":
        await _forever()
    if fault == "truncated_body":  # a Content-Length the body never reaches
        response = web.StreamResponse(headers={"Content-Length": str(len(PCM) * 4)})
        await response.prepare(request)
        await response.write(PCM)
        assert request.transport is not None
        request.transport.close()
        return response
    response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
    await response.prepare(request)
    if fault == "wav_header":
        await response.write(WAV)
    elif fault == "wav_header_in_pieces":  # the header cut over chunks of the body
        for offset in range(0, len(WAV), 5):
            await response.write(WAV[offset : offset + 5])
    elif fault == "partial_sample":
        await response.write(PCM + b"\x01")
    elif fault == "many_small_chunks":  # chunks that cut samples in two are fine: only the total counts
        for offset in range(0, len(PCM) * 2, 7):
            await response.write((PCM * 2)[offset : offset + 7])
    elif fault != "empty_200":
        await response.write(PCM)
        if fault == "reset_mid_body":
            assert request.transport is not None
            request.transport.abort()
            return response
        if fault == "slow_after_audio":
            await _forever()
        await response.write(PCM)
    await response.write_eof()
    return response


def _model_error(status: int) -> web.Response:
    body = {"OriginalStatusCode": status, "OriginalMessage": "injected", "message": "injected"}
    return web.json_response(body, status=424, headers={"x-amzn-ErrorType": "ModelError:http://internal"})


async def _sagemaker(request: web.Request) -> web.StreamResponse:
    fault = request.match_info["name"]
    context_id = str((await request.json()).get("context_id"))
    if fault.startswith("model_error_"):
        return _model_error(int(fault.rsplit("_", 1)[1]))
    if fault == "slow_first_byte":
        await _forever()
    lines: dict[str, list[str]] = {
        "none": [chunk(context_id), chunk(context_id), done(context_id)],
        "duplicate_done": [chunk(context_id), done(context_id), done(context_id)],
        "chunk_after_done": [chunk(context_id), done(context_id), chunk(context_id)],
        "done_without_audio": [done(context_id)],
        "empty_chunks": [chunk(context_id, ""), done(context_id)],
        "no_done": [chunk(context_id)],
        "empty_stream": [],
        "truncated_json": [chunk(context_id)[:25], done(context_id)],
        "bad_base64": [chunk(context_id, "not base64!"), done(context_id)],
        "wav_header": [chunk(context_id, _b64(WAV)), done(context_id)],
        "partial_sample": [chunk(context_id, _b64(PCM + b"\x01")), done(context_id)],
        "error_event_500": [chunk(context_id), error(context_id, 500)],
        "error_event_429": [error(context_id, 429)],
        "stream_error": [chunk(context_id)],
        "reset_mid_stream": [chunk(context_id)],
    }
    response = web.StreamResponse(headers={"Content-Type": eventstream.CONTENT_TYPE})
    await response.prepare(request)
    for line in lines[fault]:
        await response.write(eventstream.payload_part(line.encode() + b"\n"))
    if fault == "stream_error":
        await response.write(eventstream.stream_exception("ModelStreamError", "injected"))
    if fault == "reset_mid_stream":
        assert request.transport is not None
        request.transport.abort()
        return response
    await response.write_eof()
    return response


@asynccontextmanager
async def fault_server() -> AsyncIterator[str]:
    """The server on a free port of 127.0.0.1, as `http://127.0.0.1:PORT`."""
    app = web.Application()
    app.router.add_get("/tts/websocket", _websocket)
    app.router.add_get("/fault/{fault}/tts/websocket", _websocket)  # for clients that build the path
    app.router.add_post("/tts/bytes", _bytes)
    app.router.add_post("/endpoints/{name}/invocations-response-stream", _sagemaker)
    runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
