"""Streamed bytes over HTTP (`POST /tts/bytes`), with connection set-up timed through aiohttp's tracing."""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

from sonic_deploy.probe.metrics import StreamRecorder
from sonic_deploy.probe.targets.cartesia_events import status_kind


async def _connect_started(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: aiohttp.TraceConnectionCreateStartParams
) -> None:
    context.trace_request_ctx["connect_began"] = time.perf_counter()


async def _connect_ended(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: aiohttp.TraceConnectionCreateEndParams
) -> None:
    began = context.trace_request_ctx.get("connect_began")
    if began is not None:
        context.trace_request_ctx["connect_s"] = time.perf_counter() - began


async def _body_sent(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: aiohttp.TraceRequestChunkSentParams
) -> None:
    """Called just before the body goes to the socket, with the headers, in the same step: the moment the
    request leaves. aiohttp's `on_request_headers_sent` is too early: it fires when the headers are put
    aside to go out with the body, which a separate task writes once the loop gets round to it."""
    context.trace_request_ctx["sent_at"] = time.perf_counter()


class _StampedHandler(ResponseHandler):
    """aiohttp's protocol, noting when the first body bytes not yet read by the probe came off the socket.

    As the WebSocket client does: under load, the task reading a body resumes a loop turn or more after
    its bytes arrived (behind every other stream's work), and that wait belongs to the client. Only a read
    that brought body bytes counts (they are counted by the response's stream, aiohttp's `_payload`): not
    one that brought only headers, and not a stamp left from an earlier response on the connection.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(loop)
        self.read_at: float | None = None

    def _body(self) -> tuple[object, int]:
        payload = getattr(self, "_payload", None)
        return payload, (payload.total_bytes if payload is not None else 0)

    def data_received(self, data: bytes) -> None:
        at = time.perf_counter()
        before, before_bytes = self._body()
        super().data_received(data)
        if self.read_at is None:
            payload, total = self._body()
            if total > (before_bytes if payload is before else 0):
                self.read_at = at


class _StampingConnector(aiohttp.TCPConnector):
    """A TCPConnector whose connections speak through `_StampedHandler` (aiohttp's `_factory` hook; if a
    release renames it, chunks are stamped when read instead, and tests/probe/test_http_client.py fails)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._factory = functools.partial(_StampedHandler, loop=self._loop)  # type: ignore[assignment]


async def stamped_body(response: aiohttp.ClientResponse) -> AsyncIterator[tuple[float, bytes]]:
    """The body as it arrives, each piece with when its first bytes were read from the socket; or when the
    reader got it, on a connection that does not note it, or for a body that had ended before its reader
    started (aiohttp has then given its connection back to the pool, with its stamp)."""
    connection = response.connection
    handler = connection.protocol if connection is not None else None
    stamped = handler if isinstance(handler, _StampedHandler) else None
    if stamped is not None and response.content.total_bytes == 0:
        stamped.read_at = None  # none of this body has come in: nothing stamped is this body's
    async for data in response.content.iter_any():
        at = stamped.read_at if stamped is not None else None
        if stamped is None or at is None:  # a connection that does not stamp its reads
            at = time.perf_counter()
        else:
            stamped.read_at = None
        yield at, data


def traced_session(max_in_flight: int, ssl_context: ssl.SSLContext | None = None) -> aiohttp.ClientSession:
    """A pool as large as the load, so that no request waits for a connection, that records per request
    (in `trace_request_ctx`) the connection set-up time and when the request was written. Direct: no
    proxy from the environment unless a request names one."""
    tracing = aiohttp.TraceConfig()
    tracing.on_connection_create_start.append(_connect_started)
    tracing.on_connection_create_end.append(_connect_ended)
    tracing.on_request_chunk_sent.append(_body_sent)
    return aiohttp.ClientSession(
        connector=_StampingConnector(limit=max_in_flight, limit_per_host=0, ssl=ssl_context or True),
        trace_configs=[tracing],
        timeout=aiohttp.ClientTimeout(total=None),
    )


def traced_start(trace: dict[str, float], recorder: StreamRecorder) -> None:
    """Once the response headers are in: connection set-up apart, TTFA from the request on the wire."""
    if "connect_s" in trace:
        recorder.connected(trace["connect_s"])
    recorder.sent_at = trace.get("sent_at", recorder.sent_at)


@contextmanager
def counted_failures(recorder: StreamRecorder, timeout_s: float) -> Iterator[None]:
    """aiohttp's failures, and the request's deadline, as error kinds on the recorder."""
    try:
        yield
    except TimeoutError:
        recorder.fail("timeout", f"no end of stream within {timeout_s} s")
    except aiohttp.ClientConnectorError as error:
        refused = isinstance(error.os_error, ConnectionRefusedError)
        recorder.fail("refused" if refused else "connect", repr(error))
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as error:
        recorder.fail("cut", repr(error))
    except aiohttp.ClientError as error:
        recorder.fail("connect" if recorder.sent_at is None else "cut", repr(error))


class HttpBytesTarget:
    route = "http"

    def __init__(self, url: str, headers: dict[str, str], timeout_s: float) -> None:
        self.url, self.headers, self.timeout_s = url, headers, timeout_s
        self._session: aiohttp.ClientSession | None = None

    async def start(self, max_in_flight: int) -> None:
        self._session = traced_session(max_in_flight)

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(self, body: dict[str, Any], recorder: StreamRecorder) -> None:
        assert self._session is not None, "start() first"
        trace: dict[str, float] = {}
        with counted_failures(recorder, self.timeout_s):
            async with asyncio.timeout(self.timeout_s):
                recorder.sent()
                async with self._session.post(
                    self.url, json=body, headers=self.headers, trace_request_ctx=trace
                ) as response:
                    traced_start(trace, recorder)
                    if response.status != 200:
                        detail = (await response.text())[:200]
                        recorder.fail(status_kind("status", response.status), detail)
                        return
                    async for at, data in stamped_body(response):
                        recorder.audio_bytes(data, at)
                    recorder.done()
