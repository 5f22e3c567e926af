"""`POST /tts/bytes` (raw or WAV) and `POST /tts/sse` (server-sent events) of the stand-in."""

from __future__ import annotations

import asyncio
import json
import struct
import uuid
from typing import Any

from aiohttp import web

from sonic_deploy.audio import BYTES_PER_SAMPLE, AudioFormat
from sonic_deploy.client import cartesia_api
from sonic_deploy.standins.reference_stream import (
    BadRequestError,
    Generation,
    ReferenceBehaviour,
    parse_request,
)
from sonic_deploy.standins.shared import (
    STANDINS,
    STATUS_FAULTS,
    abort,
    count_value,
    error_body,
    http_error,
    refused,
)


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
    request: web.Request, behaviour: ReferenceBehaviour, containers: tuple[str, ...]
) -> tuple[Generation, str, float] | web.Response:
    """The parsed request and its fault, or the response that refuses it."""
    arrived = asyncio.get_running_loop().time()
    refusal = refused(request, behaviour)
    if refusal is not None:
        return refusal
    try:
        body = await request.json()
        generation = parse_request(body, require_context=False, containers=containers)
    except (ValueError, BadRequestError) as error:
        return http_error(422, str(error))
    count_value(behaviour, "model", body.get("model_id"))
    fault = behaviour.admit()
    if fault is None:
        return http_error(429, "no free capacity")
    if fault in STATUS_FAULTS:
        behaviour.release(False)
        return http_error(STATUS_FAULTS[fault], "injected fault")
    return generation, fault, arrived


async def tts_bytes(request: web.Request) -> web.StreamResponse:
    behaviour = request.app[STANDINS].behaviour
    parsed = await _http_request(request, behaviour, cartesia_api.CONTAINERS)
    if isinstance(parsed, web.Response):
        return parsed
    generation, fault, arrived = parsed
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
                abort(request)
                return response
        return response
    except ConnectionResetError:  # the client went away; nothing to answer
        return web.Response(status=499)
    finally:
        behaviour.release(completed)


async def tts_sse(request: web.Request) -> web.StreamResponse:
    behaviour = request.app[STANDINS].behaviour
    parsed = await _http_request(request, behaviour, ("raw",))
    if isinstance(parsed, web.Response):
        return parsed
    generation, fault, arrived = parsed
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
                body = error_body(500, "injected error event", None, uuid.uuid4().hex)
                await response.write(f"event: error\ndata: {json.dumps(body)}\n\n".encode())
                await response.write_eof()
                return response
            else:
                abort(request)
                return response
        return response
    except ConnectionResetError:
        return web.Response(status=499)
    finally:
        behaviour.release(completed)
