"""The aiohttp connection pool the HTTP clients share, and when their bytes really arrived.

Each connection notes when body bytes came off the socket (`stamped_body`), and each request can record,
in the mapping passed as aiohttp's `trace_request_ctx`, how long a new connection took to set up
(`connect_s`) and when the request was written (`sent_at`). Under load the task reading a body resumes a
loop turn or more after its bytes arrived, behind every other stream's work: that wait belongs to the
client, not to the server, and an agent's time-to-first-byte or the probe's TTFA must not include it.
"""

from __future__ import annotations

import asyncio
import functools
import math
import ssl
import time
from collections.abc import AsyncIterator, Mapping, MutableMapping
from types import SimpleNamespace, TracebackType
from typing import Any, Self

import aiohttp
import yarl
from aiohttp.client_proto import ResponseHandler

from sonic_deploy.client.errors import SonicError, error_for
from sonic_deploy.client.eventstream import FrameError

Trace = MutableMapping[str, float]


def _trace(context: SimpleNamespace) -> Trace | None:
    trace = context.trace_request_ctx
    return trace if isinstance(trace, MutableMapping) else None


async def _connect_started(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: aiohttp.TraceConnectionCreateStartParams
) -> None:
    trace = _trace(context)
    if trace is not None:
        trace["connect_began"] = time.perf_counter()


async def _connect_ended(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: aiohttp.TraceConnectionCreateEndParams
) -> None:
    trace = _trace(context)
    began = trace.get("connect_began") if trace is not None else None
    if trace is not None and began is not None:
        trace["connect_s"] = time.perf_counter() - began


async def _body_sent(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: aiohttp.TraceRequestChunkSentParams
) -> None:
    """Called just before the body goes to the socket, with the headers, in the same step: the moment the
    request leaves. aiohttp's `on_request_headers_sent` is too early: it fires when the headers are put
    aside to go out with the body, which a separate task writes once the loop gets round to it."""
    trace = _trace(context)
    if trace is not None:
        trace["sent_at"] = time.perf_counter()


class _StampedHandler(ResponseHandler):
    """aiohttp's protocol, noting when the first body bytes not yet read by the caller came off the socket.

    Only a read that brought body bytes counts (they are counted by the response's stream, aiohttp's
    `_payload`): not one that brought only headers, and not a stamp left from an earlier response on the
    connection.
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
    release renames it, chunks are stamped when read instead, and tests/client/test_http.py fails)."""

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


def pooled_session(
    max_connections: int,
    ssl_context: ssl.SSLContext | None = None,
    timeout: aiohttp.ClientTimeout | None = None,
) -> aiohttp.ClientSession:
    """One pool of at most `max_connections` (any number per host), whose requests record their set-up and
    send times in a `trace_request_ctx` mapping when given one. Direct: no proxy from the environment
    unless a request names one (looked up once by its owner, not on every request as `trust_env` does)."""
    tracing = aiohttp.TraceConfig()
    tracing.on_connection_create_start.append(_connect_started)
    tracing.on_connection_create_end.append(_connect_ended)
    tracing.on_request_chunk_sent.append(_body_sent)
    return aiohttp.ClientSession(
        connector=_StampingConnector(limit=max_connections, limit_per_host=0, ssl=ssl_context or True),
        trace_configs=[tracing],
        timeout=timeout or aiohttp.ClientTimeout(total=None),
    )


# Enough of an error body for its code and message; the rest is not read.
ERROR_BODY_BYTES = 64 * 1024
# How long the end of a finished stream's body may take before its connection is dropped, not reused.
DRAIN_S = 5.0


def request_error(error: Exception, what: str, bound_s: float | None = None) -> SonicError | None:
    """The typed error for an aiohttp failure to reach `what` or to send to it, or None if it is not one;
    a timeout names `bound_s`, the request's own bound, when it has one."""
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        return error_for(
            "tls",
            f"{what}'s certificate is not trusted ({error.certificate_error}). Fix: the CA that signs it "
            "(AWS_CA_BUNDLE, or ca_bundle in the AWS config file, for an AWS service)",
        )
    if isinstance(error, aiohttp.ClientConnectorError):
        refused = isinstance(error.os_error, ConnectionRefusedError)
        return error_for("refused" if refused else "connect", repr(error))
    within = "" if bound_s is None else f" within {bound_s:g} s"
    if isinstance(error, aiohttp.ConnectionTimeoutError):
        return error_for("timeout", f"no connection to {what}{within} ({error!r})")
    if isinstance(error, (TimeoutError, aiohttp.ServerTimeoutError)):
        return error_for("timeout", f"no response from {what}{within} ({error!r})")
    if isinstance(error, aiohttp.ClientError):
        return error_for("cut", repr(error))
    return None


def read_error(error: Exception, bound_s: float | None = None) -> SonicError:
    """The typed error for a failure while a response body streams in: bytes that are not AWS event-stream
    frames, no bytes within the read timeout (`bound_s`, when known), or a broken connection."""
    if isinstance(error, FrameError):
        return error_for("malformed", f"bad event-stream frame: {error}")
    if isinstance(error, (TimeoutError, aiohttp.ServerTimeoutError)):
        within = "the read timeout" if bound_s is None else f"{bound_s:g} s"
        return error_for("timeout", f"no bytes within {within} ({error!r})")
    return error_for("cut", repr(error))


# What `read_error` names: catch these around the reading of a body.
READ_ERRORS = (FrameError, TimeoutError, aiohttp.ClientError)


async def error_body(response: aiohttp.ClientResponse) -> bytes:
    """An error response's body, to its end or ERROR_BODY_BYTES (it may come in several reads)."""
    raw = b""
    while len(raw) < ERROR_BODY_BYTES and (part := await response.content.read(ERROR_BODY_BYTES - len(raw))):
        raw += part
    return raw


async def _drain(response: aiohttp.ClientResponse) -> None:
    try:
        async with asyncio.timeout(DRAIN_S):
            while await response.content.readany():
                pass
    except (TimeoutError, aiohttp.ClientError, OSError):
        response.close()
        return
    except asyncio.CancelledError:  # the client is closing, or the loop ending: the body's end will not come
        response.close()
        raise
    response.release()


class PooledClient:
    """What a streaming HTTP client keeps per event loop: one pool of at most `max_connections` connections
    (made on first use, on the loop that uses it; on another loop, a second `asyncio.run`, anew), and the
    finished streams whose connections go back to the pool once their bodies end. Use it as an async
    context manager, or call `close()`."""

    def __init__(self, max_connections: int, timeout: aiohttp.ClientTimeout) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, not {max_connections}")
        self._max_connections = max_connections
        self._timeout = timeout
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # The finished streams whose body is still draining, with their responses: `close()` closes
        # those, whether their drain had started or not (a task cancelled before its first step runs none).
        self._draining: dict[asyncio.Future[None], aiohttp.ClientResponse] = {}

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        while self._draining:  # a stream finishing while the drains stop adds one: stopped in the next round
            draining = dict(self._draining)
            for task in draining:
                task.cancel()
            await asyncio.gather(*draining, return_exceptions=True)
            for task, response in draining.items():
                response.close()
                self._draining.pop(task, None)
        if self._session is not None and self._loop is asyncio.get_running_loop():
            await self._session.close()
        self._session = None

    def _here(self) -> None:
        """The pool belongs to one event loop: on another, it is made anew (the old pool's sockets are its
        old loop's, closed with it)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop, self._session = loop, None

    def _ssl_context(self) -> ssl.SSLContext | None:
        """The CAs to trust (None: the system's)."""
        return None

    def _pool(self) -> aiohttp.ClientSession:
        self._here()
        if self._session is None or self._session.closed:
            self._session = pooled_session(self._max_connections, self._ssl_context(), self._timeout)
        return self._session

    async def _post(
        self,
        url: str | yarl.URL,
        payload: bytes,
        headers: Mapping[str, str],
        what: str,
        trace: Trace | None,
        proxy: str | None = None,
        wait_timeout_s: float | None = None,
    ) -> aiohttp.ClientResponse:
        """POST on the pool; a typed error (`request_error`) if `what` cannot be reached or written to.
        `wait_timeout_s` bounds this request's wait for a connection (pooled or new: by default a wait for
        a pooled one has no bound) and each wait for its next bytes, in place of the client's read bound."""
        timeout = self._timeout
        if wait_timeout_s is not None:
            if not (math.isfinite(wait_timeout_s) and wait_timeout_s > 0):
                raise ValueError(f"wait_timeout_s={wait_timeout_s!r}: not a positive number of seconds")
            timeout = aiohttp.ClientTimeout(
                total=timeout.total,
                connect=wait_timeout_s,
                sock_connect=timeout.sock_connect,
                sock_read=wait_timeout_s,
                ceil_threshold=timeout.ceil_threshold,
            )
        try:
            return await self._pool().post(
                url, data=payload, headers=headers, proxy=proxy, trace_request_ctx=trace, timeout=timeout
            )
        except (TimeoutError, aiohttp.ClientError) as error:
            typed = request_error(error, what, wait_timeout_s)
            assert typed is not None
            raise typed from error

    def _recycle(self, response: aiohttp.ClientResponse) -> None:
        """The connection of a finished stream back to the pool once its body has ended: at once as a rule
        (the end follows the last event in the same read), or in the background, so that the caller's
        stream ends with its last event and not when the server gets round to closing the body."""
        if response.content.at_eof():
            response.release()
            return
        draining = asyncio.ensure_future(_drain(response))
        self._draining[draining] = response
        draining.add_done_callback(self._drained)

    def _drained(self, draining: asyncio.Future[None]) -> None:
        self._draining.pop(draining, None)
