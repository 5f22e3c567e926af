"""The Cartesia WebSocket API: one socket per stream, or many contexts multiplexed on shared sockets."""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.frames import DATA_OPCODES, Frame
from websockets.protocol import Event

from sonic_deploy.probe.metrics import MalformedEventError, StreamRecorder
from sonic_deploy.probe.targets.cartesia_events import apply_event, decode_event, status_kind


def classify_connect_error(error: BaseException) -> str:
    if isinstance(error, InvalidStatus):
        return status_kind("status", error.response.status_code)
    if isinstance(error, ConnectionRefusedError):
        return "refused"
    if isinstance(error, TimeoutError):
        return "timeout"
    return "connect"


class StampedConnection(ClientConnection):
    """Stamps each message when its bytes were read from the socket, not when a coroutine got round to it.

    Under load many coroutines are ready at once; the time a message waited for its reader to be scheduled
    belongs to the client, not to the server, so it must not be counted in the server's TTFA.
    """

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


class WebSocketTarget:
    route = "ws"

    def __init__(self, url: str, headers: dict[str, str], multiplex: int, timeout_s: float) -> None:
        self.url, self.headers, self.multiplex, self.timeout_s = url, headers, max(1, multiplex), timeout_s
        self._sockets: list[_SharedSocket] = []
        self._pool_lock = asyncio.Lock()

    async def start(self, max_in_flight: int) -> None:
        self._sockets = []

    async def stop(self) -> None:
        await asyncio.gather(*(s.close() for s in self._sockets), return_exceptions=True)
        self._sockets = []

    async def _open(self, recorder: StreamRecorder) -> StampedConnection:
        began = time.perf_counter()
        socket = await connect(
            self.url,
            create_connection=StampedConnection,
            # Directly, never through an HTTP(S)_PROXY from the environment: a probe measures the route,
            # and looking the proxy settings up again on every connection costs CPU under load.
            proxy=None,
            additional_headers=self.headers,
            compression=None,
            max_size=None,
            ping_interval=None,
            open_timeout=self.timeout_s,
        )
        recorder.connected(time.perf_counter() - began)
        assert isinstance(socket, StampedConnection)
        return socket

    async def request(self, body: dict[str, Any], recorder: StreamRecorder) -> None:
        try:
            async with asyncio.timeout(self.timeout_s):
                if self.multiplex > 1:
                    await self._multiplexed(body, recorder)
                else:
                    await self._dedicated(body, recorder)
        except TimeoutError:
            recorder.fail("timeout", f"no end of stream within {self.timeout_s} s")

    async def _dedicated(self, body: dict[str, Any], recorder: StreamRecorder) -> None:
        try:
            socket = await self._open(recorder)
        except (OSError, InvalidHandshake) as error:
            recorder.fail(classify_connect_error(error), repr(error))
            return
        try:
            text = json.dumps(body)
            recorder.sent()  # before the await: the request is on its way once send() writes it
            await socket.send(text)
            while True:
                message = await socket.recv()
                if apply_event(decode_event(message), socket.arrival(), recorder):
                    return
        except ConnectionClosed as error:
            recorder.fail("cut", repr(error))
        except MalformedEventError as error:
            recorder.fail("malformed", str(error))
        finally:
            if recorder.ok:
                await _quiet_close(socket)
            else:
                socket.transport.abort()

    async def _multiplexed(self, body: dict[str, Any], recorder: StreamRecorder) -> None:
        async with self._pool_lock:
            shared = next((s for s in self._sockets if s.open and s.in_flight < self.multiplex), None)
            if shared is None:
                try:
                    shared = _SharedSocket(await self._open(recorder))
                except (OSError, InvalidHandshake) as error:
                    recorder.fail(classify_connect_error(error), repr(error))
                    return
                self._sockets.append(shared)
            shared.in_flight += 1
        try:
            await shared.run(body, recorder)
        finally:
            shared.in_flight -= 1


class _SharedSocket:
    """One socket carrying many contexts; a single reader routes each message by `context_id`."""

    def __init__(self, socket: StampedConnection) -> None:
        self.socket = socket
        self.in_flight = 0
        self.open = True
        self._contexts: dict[str, tuple[StreamRecorder, asyncio.Future[None]]] = {}
        self._reader = asyncio.create_task(self._read())

    async def run(self, body: dict[str, Any], recorder: StreamRecorder) -> None:
        finished: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        context_id = str(body["context_id"])
        self._contexts[context_id] = (recorder, finished)
        try:
            if not self.open:
                recorder.fail("cut", "socket closed before the request was sent")
                return
            text = json.dumps(body)
            recorder.sent()
            await self.socket.send(text)
            await finished
        except ConnectionClosed as error:
            recorder.fail("cut", repr(error))
        finally:
            self._contexts.pop(context_id, None)

    async def _read(self) -> None:
        try:
            async for message in self.socket:
                at = self.socket.arrival()
                try:
                    event = decode_event(message)
                except MalformedEventError:
                    continue  # unattributable: the context it belonged to will time out and say so
                entry = self._contexts.get(str(event.get("context_id")))
                if entry is None:
                    continue
                recorder, finished = entry
                try:
                    if apply_event(event, at, recorder):
                        _settle(finished)
                except MalformedEventError as error:
                    recorder.fail("malformed", str(error))
                    _settle(finished)
        except ConnectionClosed:
            pass
        finally:
            self.open = False
            for recorder, finished in list(self._contexts.values()):
                recorder.fail("cut", "socket closed mid-stream")
                _settle(finished)

    async def close(self) -> None:
        self.open = False
        await _quiet_close(self.socket)
        self._reader.cancel()


async def _quiet_close(socket: ClientConnection) -> None:
    try:
        await asyncio.wait_for(socket.close(), timeout=2)
    except (OSError, TimeoutError, ConnectionClosed):
        socket.transport.abort()


def _settle(finished: asyncio.Future[None]) -> None:
    if not finished.done():
        finished.set_result(None)
