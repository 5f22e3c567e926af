"""The Cartesia WebSocket API, through the client core (sonic_deploy.client.cartesia_ws), in three shapes:

- one socket per stream (`--multiplex 1`): what a client that connects per utterance pays;
- many contexts multiplexed on shared sockets (`--multiplex N`);
- an agent's traffic (`--agent`): one long-lived socket per call, reused turn after turn (renewed when idle
  too long), each turn's transcript sent in pieces with `continue: true` at an LLM's pace, as pipecat's and
  LiveKit's Cartesia services send it, then an empty `continue: false` to end the context.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Any

from websockets.exceptions import ConnectionClosed, InvalidHandshake

from sonic_deploy.client.cartesia_ws import CartesiaSocket, Context, SocketClosedError, SocketPool
from sonic_deploy.client.websocket import closed_kind, connect_error_kind
from sonic_deploy.probe.metrics import MalformedEventError, StreamRecorder
from sonic_deploy.probe.requests import AgentTraffic, split_pieces
from sonic_deploy.probe.targets.cartesia_events import apply_event


class WebSocketTarget:
    route = "ws"

    def __init__(
        self,
        url: str,
        headers: dict[str, str],
        multiplex: int,
        timeout_s: float,
        agent: AgentTraffic | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.url, self.headers, self.multiplex, self.timeout_s = url, headers, max(1, multiplex), timeout_s
        self.agent, self.ssl_context = agent, ssl_context
        self._pool: SocketPool | None = None

    async def start(self, max_in_flight: int) -> None:
        if self.agent is not None:
            self._pool = SocketPool(
                self.url,
                self.headers,
                idle_s=self.agent.idle_reconnect_s,
                timeout_s=self.timeout_s,
                ssl_context=self.ssl_context,
            )
        elif self.multiplex > 1:
            self._pool = SocketPool(
                self.url,
                self.headers,
                contexts_per_socket=self.multiplex,
                idle_s=float("inf"),
                timeout_s=self.timeout_s,
                ssl_context=self.ssl_context,
            )

    async def stop(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def request(self, body: dict[str, Any], recorder: StreamRecorder) -> None:
        socket: CartesiaSocket | None = None
        context: Context | None = None
        try:
            async with asyncio.timeout(self.timeout_s):
                stream = _Stream(recorder)
                context_id = str(body["context_id"])
                try:
                    if self._pool is not None:
                        context = await self._pool.open_context(
                            context_id, stream.deliver, recorder.connected
                        )
                    else:
                        began = time.perf_counter()
                        socket = await CartesiaSocket.connect(
                            self.url, self.headers, self.timeout_s, self.ssl_context, multiplexed=False
                        )
                        recorder.connected(time.perf_counter() - began)
                        context = socket.context(context_id, stream.deliver)
                except (OSError, InvalidHandshake) as error:
                    recorder.fail(connect_error_kind(error), repr(error))
                    return
                stream.context, socket = context, context.socket
                if self.agent is not None:
                    await self._turn(context, body, self.agent, recorder)
                elif not context.ended.is_set():  # a socket that closed before the request has ended it
                    recorder.sent()  # before the await: the request is on its way once send() writes it
                    await context.send(body)
                await context.ended.wait()
                _account_for_end(context, recorder)
        except TimeoutError:
            recorder.fail("timeout", f"no end of stream within {self.timeout_s} s")
        except ConnectionClosed as error:
            # Closed while sending: the close code says whether the server was turning streams away.
            code = error.rcvd.code if error.rcvd is not None else None
            recorder.fail(closed_kind(SocketClosedError(code, repr(error))), repr(error))
        finally:
            if context is not None:  # counted however the request ended (a timeout, most likely)
                recorder.foreign_messages = context.foreign
            await self._settle(socket, context, recorder)

    async def _turn(
        self, context: Context, body: dict[str, Any], agent: AgentTraffic, recorder: StreamRecorder
    ) -> None:
        """One turn as an agent sends it: pieces with `continue: true` as the LLM streams, then the end."""
        pieces = split_pieces(str(body["transcript"]), agent.split)
        extra: dict[str, Any] = {"continue": True, "add_timestamps": agent.timestamps}
        if agent.max_buffer_delay_ms is not None:
            extra["max_buffer_delay_ms"] = agent.max_buffer_delay_ms
        for index, piece in enumerate(pieces):
            if context.ended.is_set():
                return
            if index:
                await asyncio.sleep(agent.interval_s)
            if index == 0:
                recorder.sent()
            if index == len(pieces) - 1:
                recorder.last_piece_sent()
            await context.send({**body, "transcript": piece, **extra})
        await context.send({**body, "transcript": "", "continue": False})

    async def _settle(
        self, socket: CartesiaSocket | None, context: Context | None, recorder: StreamRecorder
    ) -> None:
        """A pooled socket stays for the next request: a context that failed is cancelled (ended here or
        not: the server may still be generating for it, and an agent's turn cut short never sent its end),
        so that no stale audio reaches the next one. A dedicated socket is closed, or dropped if its stream
        failed."""
        if socket is None:
            return
        if self._pool is None:
            if recorder.ok:
                await socket.close()
            else:
                socket.abort()
        elif context is not None and (not recorder.ok or not context.ended.is_set()):
            await context.cancel()


def _account_for_end(context: Context, recorder: StreamRecorder) -> None:
    """What ended a context other than its own `done` or `error`, as an error kind."""
    if context.failure is not None:
        recorder.fail("unexpected", repr(context.failure))
    elif context.lost is not None:  # `malformed`, or on a multiplexed socket `unattributed`
        recorder.fail(context.lost.kind, str(context.lost))
    elif context.closed is not None:
        recorder.fail(closed_kind(context.closed), str(context.closed))
    elif recorder.end_at is None:
        recorder.fail("cut", "the context ended without done")


class _Stream:
    """Accounts for each message of one context on its recorder, as the socket's reader delivers it."""

    def __init__(self, recorder: StreamRecorder) -> None:
        self.recorder = recorder
        self.context: Context | None = None

    def deliver(self, message: dict[str, Any], at: float) -> None:
        recorder = self.recorder
        if recorder.end_at is not None:
            return  # the stream has ended (a malformed message): what follows is a consequence
        try:
            apply_event(message, at, recorder)
        except MalformedEventError as error:
            recorder.fail("malformed", str(error))
            if self.context is not None:
                self.context.finish()
