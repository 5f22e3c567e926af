"""What the SageMaker wire costs without aiohttp: the client's signed request on a plain asyncio Protocol,
for bench/adapter_cost.py's `plain-http` caller (issue 31). A measurement, not a client: plain HTTP to the
stand-in only (no TLS, no proxy, no timeouts), keep-alive connections reused, a chunked 200 response
expected. The body goes through the decoding and checks `SageMakerClient.speak()` uses (`FrameDecoder`,
`sagemaker._payload_events`, `_audio`) as it comes off the socket, and the caller's task wakes once per
read; none of the client's work above them (per-read stamps, `AudioChunk`s, its generators): its saving is
an upper bound on what a transport of our own would save.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import AsyncIterator

import orjson

from sonic_deploy.client import SageMakerClient, SonicError
from sonic_deploy.client.eventstream import FrameDecoder, FrameError, LineAssembler
from sonic_deploy.client.sagemaker import _audio, _payload_events, request_body


class _Response(asyncio.Protocol):
    """One connection: a response's head, then its chunked body decoded into audio, read after read."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self.begin()

    def begin(self) -> None:
        """Ready for the next response on this connection."""
        self._buffer = b""
        self._head: bytes | None = None
        self._left = 0  # bytes of the current chunk's data still to come
        self._skip = 0  # bytes of a chunk's closing CRLF still to come
        self._last = False  # the zero-size chunk has come: its CRLF ends the body
        self._frames, self._lines = FrameDecoder(), LineAssembler()
        self.audio: list[bytes] = []
        self.ended = False
        self._waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._wake()

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer + data if self._buffer else data
        if self._head is None:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                self._buffer = buffer
                return
            self._head, buffer = buffer[:end], buffer[end + 4 :]
            head = self._head.lower()
            if not head.startswith(b"http/1.1 200 ") or b"\r\ntransfer-encoding: chunked" not in head:
                raise SystemExit(f"plain-http: the stand-in answered {self._head[:60]!r}: not a chunked 200")
        self._buffer = self._chunks(buffer)
        self._wake()

    def _chunks(self, buffer: bytes) -> bytes:
        """Decodes the chunks `buffer` completes; what is left of it (a chunk-size line cut short)."""
        at = 0
        while at < len(buffer) and not self.ended:
            if self._skip:
                taken = min(self._skip, len(buffer) - at)
                if buffer[at : at + taken] != b"\r\n"[2 - self._skip : 2 - self._skip + taken]:
                    raise SystemExit("plain-http: a chunk not ended by CRLF: the run is broken")
                self._skip, at = self._skip - taken, at + taken
                self.ended = self._last and not self._skip
            elif self._left:
                taken = min(self._left, len(buffer) - at)
                self._body(buffer[at : at + taken])
                self._left, at = self._left - taken, at + taken
                if not self._left:
                    self._skip = 2
            else:
                line_end = buffer.find(b"\r\n", at)
                if line_end < 0:
                    return buffer[at:]
                try:
                    size = int(buffer[at:line_end].split(b";")[0], 16)
                except ValueError:
                    raise SystemExit(f"plain-http: a bad chunk size {buffer[at:line_end][:20]!r}") from None
                at = line_end + 2
                # The zero-size chunk has no data, and the stand-in sends no trailers: "0\r\n\r\n".
                self._left, self._last = size, size == 0
                self._skip = 2 if self._last else 0
        if at < len(buffer):
            raise SystemExit("plain-http: bytes after a response's end: the run is broken")
        return b""

    def _body(self, data: bytes) -> None:
        """The client's own decoding and checks of each event (`sagemaker._payload_events`, `_audio`)."""
        try:
            for headers, payload in self._frames.feed(data):
                for event in _payload_events(headers, payload, self._lines):
                    if event.get("type") == "chunk" and event.get("data"):
                        self.audio.append(_audio(event["data"]))
        except (SonicError, FrameError) as error:
            raise SystemExit(f"plain-http: the stand-in's stream is broken: {error}") from None

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        self._waiter = asyncio.get_running_loop().create_future()
        await self._waiter


class PlainHttp:
    """`speak()`: one utterance's audio pieces as they are decoded, on a pool of kept-alive connections."""

    def __init__(self, client: SageMakerClient, text: str, voice: str, rate: int) -> None:
        self._client, self._text, self._voice, self._rate = client, text, voice, rate
        self._url = urllib.parse.urlsplit(client.url)
        if self._url.scheme != "http" or self._url.hostname is None or self._url.port is None:
            raise SystemExit(f"plain-http: {client.url} is not the stand-in's http://HOST:PORT")
        self._host, self._port = self._url.hostname, self._url.port
        self._idle: list[_Response] = []

    async def speak(self) -> AsyncIterator[bytes]:
        payload = orjson.dumps(request_body(self._text, voice=self._voice, sample_rate=self._rate))
        headers = self._client._signer.sign(payload, await self._client.credentials())
        connection = await self._connection()
        lines = [
            f"POST {self._url.path} HTTP/1.1",
            f"Host: {self._url.netloc}",
            f"Content-Length: {len(payload)}",
        ]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        assert connection.transport is not None
        connection.transport.write(("\r\n".join(lines) + "\r\n\r\n").encode() + payload)
        while True:
            if connection.audio:
                audio, connection.audio = connection.audio, []
                for piece in audio:
                    yield piece
            if connection.ended:
                connection.begin()
                self._idle.append(connection)
                return
            if connection.lost:
                raise SystemExit(
                    "plain-http: the stand-in closed a connection mid-response: the run is broken"
                )
            await connection.wait()

    async def _connection(self) -> _Response:
        while self._idle:
            connection = self._idle.pop()
            if not connection.lost:
                return connection
        loop = asyncio.get_running_loop()
        _, protocol = await loop.create_connection(_Response, self._host, self._port)
        return protocol

    async def close(self) -> None:
        for connection in self._idle:
            if connection.transport is not None:
                connection.transport.close()
        self._idle.clear()
        await self._client.close()
