"""`POST /endpoints/{name}/invocations-response-stream` of the stand-in: SageMaker's
`InvokeEndpointWithResponseStream`, newline-terminated JSON in AWS event-stream frames that boto3 parses."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from aiohttp import web

from sonic_deploy.client import cartesia_api, eventstream
from sonic_deploy.standins.reference_stream import BadRequestError, Event, Generation, parse_request
from sonic_deploy.standins.shared import STANDINS, STATUS_FAULTS, abort, count_value, error_body


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


async def invocations_response_stream(request: web.Request) -> web.StreamResponse:
    arrived = asyncio.get_running_loop().time()
    behaviour = request.app[STANDINS].behaviour
    # Not checked (any keys sign): counted by access key id, so a client's credential refresh shows.
    signed = request.headers.get("Authorization", "").partition("Credential=")[2].partition("/")[0]
    count_value(behaviour, "access_key", signed)
    try:
        generation = _sagemaker_request(await request.json())
    except (ValueError, BadRequestError) as error:
        return _model_error(422, str(error))
    fault = behaviour.admit()
    if fault is None:
        return _model_error(429, "no free capacity")
    completed = False
    try:
        if fault in STATUS_FAULTS:
            return _model_error(STATUS_FAULTS[fault], "injected fault")
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
                abort(request)
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
            body = error_body(500, "injected error event", self.context_id, uuid.uuid4().hex)
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
