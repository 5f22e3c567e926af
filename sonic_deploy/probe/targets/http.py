"""Streamed bytes over HTTP (`POST /tts/bytes`), through the client core's stamped, traced pool."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import aiohttp

from sonic_deploy.client.cartesia_api import status_kind
from sonic_deploy.client.http import pooled_session, stamped_body
from sonic_deploy.probe.metrics import MalformedEventError, StreamRecorder


def traced_start(trace: Mapping[str, float], recorder: StreamRecorder) -> None:
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
    except aiohttp.ClientConnectorCertificateError as error:
        recorder.fail("tls", repr(error))
    except aiohttp.ClientConnectorError as error:
        refused = isinstance(error.os_error, ConnectionRefusedError)
        recorder.fail("refused" if refused else "connect", repr(error))
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as error:
        recorder.fail("cut", repr(error))
    except aiohttp.ClientError as error:
        recorder.fail("connect" if recorder.sent_at is None else "cut", repr(error))


def _not_audio(content_type: str) -> bool:
    """Text or JSON is never audio, whatever the API names its audio types (aiohttp reads a missing
    Content-Type as application/octet-stream)."""
    return content_type.startswith("text/") or content_type.split(";")[0].endswith(("/json", "+json"))


async def _body_start(response: aiohttp.ClientResponse, limit: int) -> str:
    """The first `limit` bytes of a body that is not audio, as text for the error's detail: a proxy's
    page or an error may be of any size, or have no end, so no more is read (the connection, its body
    unread, is then closed rather than reused)."""
    start = b""
    while len(start) < limit and (piece := await response.content.read(limit - len(start))):
        start += piece
    return start.decode("utf-8", errors="replace")


class HttpBytesTarget:
    route = "http"

    def __init__(
        self, url: str, headers: dict[str, str], timeout_s: float, ssl_context: ssl.SSLContext | None = None
    ) -> None:
        self.url, self.headers, self.timeout_s, self.ssl_context = url, headers, timeout_s, ssl_context
        self._session: aiohttp.ClientSession | None = None

    async def start(self, max_in_flight: int) -> None:
        self._session = pooled_session(max_in_flight, self.ssl_context)

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
                        detail = await _body_start(response, 200)
                        recorder.fail(status_kind("status", response.status), detail)
                        return
                    if _not_audio(response.content_type):  # a proxy's page, an error said with a 200
                        text = await _body_start(response, 120)
                        recorder.fail("malformed", f"a 200 of {response.content_type}, not audio: {text!r}")
                        return
                    try:
                        async for at, data in stamped_body(response):
                            recorder.audio_bytes(data, at)
                    except MalformedEventError as error:
                        recorder.fail("malformed", str(error))
                        return
                    recorder.done()
