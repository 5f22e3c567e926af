"""`GET /tts/websocket` of the stand-in: contexts multiplexed on one socket, continued, flushed and cancelled."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import Any

from aiohttp import WSMsgType, web

from sonic_deploy.client import cartesia_api
from sonic_deploy.standins.reference_stream import (
    BadRequestError,
    Generation,
    ReferenceBehaviour,
    parse_request,
)
from sonic_deploy.standins.shared import STANDINS, STATUS_FAULTS, abort, count_value, error_body, refused

_SENTENCE_ENDS = (".", "!", "?", ";", ":")


async def tts_websocket(request: web.Request) -> web.StreamResponse:
    behaviour = request.app[STANDINS].behaviour
    refusal = refused(request, behaviour)
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
        self.refused = _RecentIds()  # refused for want of capacity (a subset of silenced)

    async def send(self, text: str) -> None:
        await self.socket.send_str(text)

    async def error(self, status: int, message: str, context_id: str | None) -> None:
        with contextlib.suppress(ConnectionError, RuntimeError):
            await self.send(json.dumps(error_body(status, message, context_id, self.request_id)))

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
                if generation.context_id in self.refused and self.behaviour.config.unnamed_refusals:
                    self.behaviour.counts["late_refusals"] += 1
                    await self.error(429, "no free capacity", None)
                return  # no stream left to join
            if generation.context_id in self.completed:
                await self.error(422, f"context {generation.context_id} has ended", generation.context_id)
                return
            count_value(self.behaviour, "model", body.get("model_id"))  # once a stream: at its opening
            context = await self._open(generation)
            if context is None:
                return
        context.inbox.put_nowait((generation, arrived))

    async def _open(self, generation: Generation) -> _Context | None:
        fault = self.behaviour.admit()
        if fault is None or fault in STATUS_FAULTS:
            self.silenced.add(generation.context_id)
            if fault is None:
                self.refused.add(generation.context_id)
                unnamed = self.behaviour.config.unnamed_refusals
                await self.error(429, "no free capacity", None if unnamed else generation.context_id)
            else:
                self.behaviour.release(False)
                await self.error(STATUS_FAULTS[fault], "injected fault", generation.context_id)
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
                abort(owner.request)
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
