"""The Cartesia WebSocket API: sockets carrying many contexts, continuations, cancel, and a pool of sockets.

One reader per socket routes each message to its context by `context_id`, and stamps it with the time its
bytes were read off the socket (under load, the time a message then waits for a coroutine belongs to the
client, not to the server). A context receives `(message, arrived_at)` through a callback: the probe
accounts for each chunk on the spot, and `Context.messages()` gives an agent the same as an async iterator.

What the API does, this code relies on (cartesia_api names the sources): several messages on one
`context_id` with `continue: true` are one audio stream; `{"context_id", "cancel": true}` stops it; `done`
or `error` ends it. An `error` without a `context_id` goes to the socket's one open context, or, with
several open, to the one sent last of those still waiting for their first message (the one the server
most likely refused; see `CartesiaSocket._route`). A refused context sends nothing more; a 429 naming no
context that may answer a piece it had sent is dropped (late_refusals.py says when, and what that costs).
A socket closed with 1013 ("try again later") means the
server is over capacity. A message for a context never opened on the socket is dropped on a dedicated
socket (one context at a time), as the official SDK drops it, and counted (`Context.foreign`); on a
multiplexed socket, where it could be any open context's audio, it ends every context on it at once
(UnattributableMessageError) rather than leaving them to time out, and the socket takes no more. So does a
message that is not JSON, on either.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.frames import DATA_OPCODES, Frame
from websockets.protocol import Event, State

from sonic_deploy.client import cartesia_api
from sonic_deploy.client.late_refusals import LateRefusals

Deliver = Callable[[dict[str, Any], float], None]
_ENDED_KEPT = 4096  # ended context ids remembered per socket, for the late messages of each


class MalformedMessageError(Exception):
    """A message that is not a JSON object."""


class UnattributableMessageError(Exception):
    """A message on the socket that no context can own: `kind` is `malformed` (not a JSON object) or, on a
    multiplexed socket, `unattributed` (naming a context never opened on the socket, or none). Whose audio
    it was cannot be known, so no context on the socket can be trusted to be whole; each one open is ended
    with it."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind


class SocketClosedError(Exception):
    """The socket closed before the context ended; `code` is the close code (1013: over capacity)."""

    def __init__(self, code: int | None, reason: str) -> None:
        super().__init__(f"socket closed (code {code}): {reason}" if code else f"socket closed: {reason}")
        self.code = code

    @property
    def over_capacity(self) -> bool:
        return self.code == cartesia_api.CLOSE_TRY_AGAIN_LATER


def decode_message(text: str | bytes) -> dict[str, Any]:
    """One JSON message. orjson parses a well-formed one at about a quarter of the standard library's CPU;
    what it refuses (NaN or Infinity, which Python's `json.dumps` writes; lone surrogates; a byte-order
    mark) goes to the standard library, so that a message is malformed only if `json.loads` refuses it."""
    try:
        message = orjson.loads(text)
    except orjson.JSONDecodeError:
        try:
            message = json.loads(text)
        except (ValueError, RecursionError) as error:
            raise MalformedMessageError(f"not JSON: {str(text)[:80]!r}") from error
    if not isinstance(message, dict):
        raise MalformedMessageError("message is not a JSON object")
    return message


class StampedConnection(ClientConnection):
    """Notes when each message's bytes were read from the socket, not when a coroutine got round to it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arrivals: deque[float] = deque()
        self._read_at = 0.0

    def data_received(self, data: bytes) -> None:
        self._read_at = time.perf_counter()
        super().data_received(data)

    def process_event(self, event: Event) -> None:
        if isinstance(event, Frame) and event.opcode in DATA_OPCODES and event.fin:
            self.arrivals.append(self._read_at)
        super().process_event(event)

    def arrival(self) -> float:
        """The read time of the message just returned by `recv()` (messages are delivered in order)."""
        return self.arrivals.popleft() if self.arrivals else time.perf_counter()


async def open_connection(
    url: str, headers: dict[str, str], timeout_s: float, ssl_context: ssl.SSLContext | None = None
) -> StampedConnection:
    """A socket to `url`, directly (never through an HTTP(S)_PROXY from the environment: the route is
    what is measured, and looking proxy settings up again for every socket costs CPU under load)."""
    options: dict[str, Any] = {} if ssl_context is None else {"ssl": ssl_context}
    socket = await connect(
        url,
        create_connection=StampedConnection,
        proxy=None,
        additional_headers=headers,
        compression=None,
        max_size=None,
        ping_interval=None,
        open_timeout=timeout_s,
        **options,
    )
    assert isinstance(socket, StampedConnection)
    return socket


class Context:
    """One context on a socket. `deliver` gets every message for it, with its arrival time; `ended` is set
    by `done`, `error`, cancel, the socket's close or its loss before the context was opened (then
    `closed` holds why), a message on the socket no context can own (then `lost` holds it), or when `deliver` raised (then `failure` holds what it
    raised)."""

    def __init__(self, socket: CartesiaSocket, context_id: str, deliver: Deliver | None) -> None:
        self.socket, self.id = socket, context_id
        self.answered = False
        self.pieces = 0  # messages sent for it
        # The socket's number of its first and last message (0: none yet), taken before the send is awaited.
        self.first_sent = self.last_sent = 0
        self.first_sent_at = 0.0  # perf_counter() at its first send
        self.ended = asyncio.Event()
        self.closed: SocketClosedError | None = None
        self.lost: UnattributableMessageError | None = None
        self.failure: Exception | None = None
        # Messages for another context dropped while this one was open on its dedicated socket.
        self.foreign = 0
        # None marks the end in the queue, so that `messages()` waits on one thing only.
        self._queue: asyncio.Queue[tuple[dict[str, Any], float] | None] | None = None
        if deliver is None:
            queue: asyncio.Queue[tuple[dict[str, Any], float] | None] = asyncio.Queue()
            self._queue, deliver = queue, lambda message, at: queue.put_nowait((message, at))
        self._deliver = deliver

    def receive(self, message: dict[str, Any], at: float) -> None:
        self.answered = True
        try:
            self._deliver(message, at)
        except Exception as error:  # the callback's own bug must not stop the socket's reader
            self.failure = error
            self.finish()
            return
        if message.get("type") in ("done", "error") or message.get("done") is True:
            self.finish()

    def finish(
        self, closed: SocketClosedError | None = None, lost: UnattributableMessageError | None = None
    ) -> None:
        if not self.ended.is_set():
            self.closed, self.lost = closed, lost
            self.ended.set()
            self.socket.forget(self)
            if self._queue is not None:
                self._queue.put_nowait(None)

    async def send(self, body: dict[str, Any]) -> None:
        """A generation request or a piece of one (`continue`), for this context; nothing once it has ended
        (a refused context's further pieces would only be refused again)."""
        if self.ended.is_set():
            return
        self.pieces += 1
        self.last_sent = self.socket.number_message()
        self.first_sent = self.first_sent or self.last_sent
        self.first_sent_at = self.first_sent_at or time.perf_counter()
        await self.socket.send({**body, "context_id": self.id})

    async def cancel(self) -> None:
        """Stop this context's audio (also once it has ended here, so that a server still generating for a
        context the client gave up on stops); nothing more is delivered for it."""
        self.finish()
        if self.socket.open:
            with contextlib.suppress(ConnectionClosed):
                await self.socket.send({"context_id": self.id, "cancel": True})

    async def messages(self) -> AsyncGenerator[tuple[dict[str, Any], float]]:
        """The context's messages as they arrive, until `done` or `error`; SocketClosedError if the socket
        closes first, UnattributableMessageError if a message no context can own ends it. Only for a
        context opened without a `deliver` callback."""
        assert self._queue is not None, "this context delivers to a callback"
        while (item := await self._queue.get()) is not None:
            yield item
        if self.closed is not None:
            raise self.closed
        if self.lost is not None:
            raise self.lost


class CartesiaSocket:
    """One socket carrying any number of contexts, read by a single task; `multiplexed=False`: one
    context at a time (a message for another is then dropped, not the end of the socket's contexts)."""

    def __init__(self, connection: StampedConnection, *, multiplexed: bool = True):
        self.connection = connection
        self.multiplexed = multiplexed
        self.opened_at = self.used_at = time.monotonic()
        self._usable = True
        self.reserved = 0
        # Told when a context leaves: a pool closes a socket it retired once its last context has left.
        self.on_room: Callable[[CartesiaSocket], None] | None = None
        self.unattributed = 0  # messages that no context could own, which ended the socket's contexts
        self.foreign = 0  # on a dedicated socket, messages for another context, dropped (`_foreign`)
        self._contexts: dict[str, Context] = {}
        # Contexts that have ended here, the newest last: what the server still sends for them (audio after
        # a cancel, a second `done`) is dropped, as the SDK drops events of contexts it no longer waits for.
        self._ended: dict[str, None] = {}
        self._lost: UnattributableMessageError | None = None
        self._messages = 0
        self.late = LateRefusals()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def connect(
        cls,
        url: str,
        headers: dict[str, str],
        timeout_s: float,
        ssl_context: ssl.SSLContext | None = None,
        *,
        multiplexed: bool = True,
    ) -> CartesiaSocket:
        return cls(await open_connection(url, headers, timeout_s, ssl_context), multiplexed=multiplexed)

    @property
    def open(self) -> bool:
        """False once a close has begun, from either side: the protocol knows it as soon as the close
        frame is read, before the reader task has run."""
        return self._usable and self.connection.state is State.OPEN

    @property
    def in_flight(self) -> int:
        """Contexts open on it, and places promised to callers of `SocketPool.acquire`."""
        return len(self._contexts) + self.reserved

    def context(self, context_id: str, deliver: Deliver | None = None, *, reserved: bool = False) -> Context:
        """A context on this socket; `reserved`: in the place `SocketPool.acquire` kept for it."""
        if reserved:
            self.reserved -= 1
        context = Context(self, context_id, deliver)
        self._contexts[context_id] = context
        self._ended.pop(context_id, None)
        self.used_at = time.monotonic()
        if not self.open:
            # Never sent: the socket was lost before it (closed, or given up over a message no context could
            # own, which was other contexts' failure, not this one's), as a request meeting a cut socket is.
            why = "closed" if self._lost is None else f"given up ({self._lost})"
            context.finish(SocketClosedError(self._close_code(), f"the socket was {why} before the request"))
        return context

    def forget(self, context: Context) -> None:
        if self._contexts.get(context.id) is context:
            del self._contexts[context.id]
            self._ended[context.id] = None
            if len(self._ended) > _ENDED_KEPT:
                del self._ended[next(iter(self._ended))]
        self.used_at = time.monotonic()
        if self.on_room is not None:
            self.on_room(self)

    def number_message(self) -> int:
        """The number of a context's message about to be sent: 1, 2, ... in the socket's order."""
        self._messages += 1
        return self._messages

    async def send(self, body: dict[str, Any]) -> None:
        await self.connection.send(json.dumps(body))

    async def _read(self) -> None:
        connection = self.connection
        try:
            async for text in connection:
                at = connection.arrival()
                try:
                    message = decode_message(text)
                except MalformedMessageError as error:
                    self._unattributable("malformed", f"a message that is not an event: {error}")
                    continue
                if self.late.drop(message, at):
                    continue
                context = self._route(message)
                if context is not None:
                    context.receive(message, at)
                    if message.get("type") != "error":
                        self.late.answered(context.first_sent)
                    elif message.get("context_id") is None:
                        self.late.refused(context.pieces, context.first_sent_at, context.last_sent, at)
                elif (named := message.get("context_id")) is None or str(named) not in self._ended:
                    if not self.multiplexed:
                        self._foreign()
                        continue
                    kind = str(message.get("type"))[:40]
                    whose = "no context" if named is None else f"context {str(named)[:60]!r}, not opened here"
                    self._unattributable("unattributed", f"a {kind!r} message for {whose}")
        except ConnectionClosed:
            pass
        finally:
            self._usable = False
            closed = SocketClosedError(self._close_code(), self._close_reason())
            for context in list(self._contexts.values()):
                context.finish(closed)

    def _foreign(self) -> None:
        """A message for another context (or none) on a dedicated socket: not this context's audio, and,
        one context being open at a time, no other's either, so it is dropped, as the SDK drops it
        (`AsyncWebSocket._process_responses` in cartesia/lib/_tts.py), and counted on the open context and
        the socket (apart from `unattributed`: those end the socket's contexts, these end nothing)."""
        self.foreign += 1
        for context in self._contexts.values():
            context.foreign += 1

    def _unattributable(self, kind: str, reason: str) -> None:
        """A message no context can own: every context open on the socket ends with it, at once (the one
        it was meant for would otherwise wait for its timeout, and the others might be missing audio), and
        the socket takes no more. The SDK drops such a message (`AsyncWebSocket._process_responses` in
        cartesia/lib/_tts.py: an event whose `context_id` names no open context is only logged) or, for
        one that is not JSON, stops reading the socket: its contexts then wait for their timeout."""
        self.unattributed += 1
        if self._lost is None:
            self._lost = UnattributableMessageError(kind, reason)
            self._usable = False
        for context in list(self._contexts.values()):
            context.finish(lost=self._lost)

    def _route(self, message: dict[str, Any]) -> Context | None:
        """The message's context; for an `error` that names none, the one context open (with its status:
        a 429 after some audio is still a 429), or, with several, the one sent last of those still waiting
        for their first message: a refusal comes back at once, while an admitted stream's first audio takes
        its time, so the waiting contexts sent earlier are the likelier to be admitted ones. None if no
        context is open, or several and none waits (the error is then no context's: see `_foreign` and
        `_unattributable`)."""
        named = message.get("context_id")
        if named is not None:
            return self._contexts.get(str(named))
        if message.get("type") != "error":
            return None
        if len(self._contexts) == 1:
            return next(iter(self._contexts.values()))
        waiting = [c for c in self._contexts.values() if c.first_sent and not c.answered]
        return max(waiting, key=lambda c: c.first_sent, default=None)

    def _close_code(self) -> int | None:
        return self.connection.close_code

    def _close_reason(self) -> str:
        return self.connection.close_reason or "connection lost"

    async def close(self) -> None:
        self._usable = False
        try:
            await asyncio.wait_for(self.connection.close(), timeout=2)
        except (OSError, TimeoutError, ConnectionClosed):
            self.connection.transport.abort()
        self._reader.cancel()

    def abort(self) -> None:
        self._usable = False
        self.connection.transport.abort()
        self._reader.cancel()


class SocketPool:
    """Long-lived sockets to one URL, each carrying up to `contexts_per_socket` contexts at a time.

    A socket is reused while it is open and younger than `max_age_s`; one idle for more than `idle_s` is
    closed and replaced before use (a load balancer or the server may have dropped it without a word: NLB
    TCP idle timeout is 350 s by default, and LiveKit's Cartesia plugin renews its sockets every 300 s).
    The newest socket with room is taken first (a scan, a few tenths of a millisecond with a thousand
    sockets open), so that a light load keeps few of them warm."""

    def __init__(
        self,
        url: str,
        headers: dict[str, str],
        *,
        contexts_per_socket: int = 1,
        idle_s: float = 300.0,
        max_age_s: float | None = None,
        timeout_s: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.url, self.headers, self.timeout_s = url, headers, timeout_s
        self.contexts_per_socket = max(1, contexts_per_socket)
        self.idle_s, self.max_age_s, self.ssl_context = idle_s, max_age_s, ssl_context
        self._sockets: list[CartesiaSocket] = []
        self._lock = asyncio.Lock()
        self._closing: set[asyncio.Task[None]] = set()

    async def open_context(
        self,
        context_id: str,
        deliver: Deliver | None = None,
        on_connect: Callable[[float], None] | None = None,
    ) -> Context:
        """A context on a socket with room for it (a new socket, its set-up time to `on_connect`, if none)."""
        socket = await self.acquire(on_connect)
        return socket.context(context_id, deliver, reserved=True)

    async def acquire(self, on_connect: Callable[[float], None] | None = None) -> CartesiaSocket:
        """A socket with room for one more context, its place kept for the caller, who must open its
        context on it at once with `reserved=True` (`open_context` does both); a new one (its set-up time
        to `on_connect`) if none has room.

        Callers are served one at a time, in turn, under the pool's lock, new sockets opened there too:
        callers behind a socket with room for several share it instead of opening more, and a thousand
        calls starting together do not hand the server a thousand handshakes at once, which complete in
        bursts and keep the calls' turns in step ever after. Measured with `bench/probe_ttfa.py --agent
        --levels 1024` on the 2-core development VM: the TTFA error's p50 was 94-154 ms with handshakes in
        parallel (four runs), 6.6-20 ms with only the handshakes in turn (seven), 2.6-3.9 ms with every
        caller in turn (three)."""
        async with self._lock:
            return self._take() or await self._connect(on_connect)

    def _take(self) -> CartesiaSocket | None:
        """The newest open socket with room, its place kept; stale ones met on the way are retired."""
        now, clock = time.monotonic(), time.perf_counter()
        found: CartesiaSocket | None = None
        stale: list[CartesiaSocket] = []
        for socket in reversed(self._sockets):
            if socket.in_flight >= self.contexts_per_socket or socket.late.pending(clock):
                continue
            if self._stale(socket, now):
                stale.append(socket)
                continue
            found = socket
            break
        for socket in stale:
            self._retire(socket)
        if found is not None:
            found.used_at = now
            found.reserved += 1
        return found

    def _retire(self, socket: CartesiaSocket) -> None:
        """No new context on it; closed once its last context has left (now, or when it leaves)."""
        if socket in self._sockets:
            self._sockets.remove(socket)
        if not socket.in_flight:
            closing = asyncio.create_task(socket.close())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)

    def _freed(self, socket: CartesiaSocket) -> None:
        if socket not in self._sockets:
            self._retire(socket)

    async def _connect(self, on_connect: Callable[[float], None] | None) -> CartesiaSocket:
        began = time.perf_counter()
        socket = await CartesiaSocket.connect(
            self.url,
            self.headers,
            self.timeout_s,
            self.ssl_context,
            multiplexed=self.contexts_per_socket > 1,
        )
        if on_connect is not None:
            on_connect(time.perf_counter() - began)
        socket.reserved += 1
        socket.on_room = self._freed
        self._sockets.append(socket)
        return socket

    def _stale(self, socket: CartesiaSocket, now: float) -> bool:
        if not socket.open:
            return True
        if not socket.in_flight and now - socket.used_at > self.idle_s:
            return True
        return self.max_age_s is not None and now - socket.opened_at > self.max_age_s

    async def close(self) -> None:
        sockets, self._sockets = self._sockets, []
        await asyncio.gather(*(socket.close() for socket in sockets), *self._closing, return_exceptions=True)
