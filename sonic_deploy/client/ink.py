"""Cartesia Ink's turns API (speech to text with turn detection), as a `turn_hops.SpeechToText`.

    ink = InkClient(api_key=KEY)
    async with await ink.session(encoding="pcm_s16le", sample_rate=16000) as stt:
        await stt.send(audio)                  # the caller's audio, at real-time pace
        transcript = await stt.receive()       # turn.update: a partial; turn.end: the final

The protocol is the official `cartesia` SDK 4.2's `stt.auto_finalize.websocket` (`resources/stt/
auto_finalize.py`, `types/stt/stt_auto_finalize_*.py`): `GET /stt/turns/websocket?model&encoding&
sample_rate` with `Authorization: Bearer KEY` and `cartesia-version`; binary messages of audio in;
`connected`, `turn.start`, `turn.update` (the turn's cumulative transcript), `turn.eager_end`,
`turn.resume`, `turn.end` (its definitive transcript) and `error` (STTErrorResponse) out. Message types
this client does not know are skipped, as the SDK's are. `{"type": "close"}` ends the session.
"""

from __future__ import annotations

import contextlib
import json
import ssl
from types import TracebackType
from typing import Self
from urllib.parse import urlencode

from websockets.exceptions import ConnectionClosed

from sonic_deploy.client import cartesia_api, stt_socket
from sonic_deploy.client.cartesia_ws import MalformedMessageError, StampedConnection, decode_message
from sonic_deploy.client.errors import error_for
from sonic_deploy.client.turn_hops import Transcript

SERVICE = "Cartesia Ink"


class InkClient:
    """Sessions on Ink's turns API at `url` (`wss://api.cartesia.ai`, or `ws://127.0.0.1:PORT` for `probe
    serve`). `cartesia_version`: the API version the SDK 4.2 sends. `connect_timeout_s` bounds the
    handshake; a session's `receive` waits as long as it takes (the caller bounds it)."""

    name = "ink"

    def __init__(
        self,
        url: str = "wss://api.cartesia.ai",
        *,
        api_key: str | None = None,
        model: str = "ink-2",
        cartesia_version: str = cartesia_api.CURRENT_API_VERSION,
        ssl_context: ssl.SSLContext | None = None,
        connect_timeout_s: float = 10.0,
    ) -> None:
        if url.startswith(("http://", "https://")):
            url = "ws" + url.removeprefix("http")
        if not url.startswith(("ws://", "wss://")):
            raise ValueError(f"url {url!r} is not a WebSocket URL. Fix: wss://api.cartesia.ai")
        self.url, self.model = url.rstrip("/"), model
        self._headers = {"cartesia-version": cartesia_version}
        if api_key is not None:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._ssl_context, self._timeout_s = ssl_context, connect_timeout_s

    async def session(self, *, encoding: str, sample_rate: int) -> InkSession:
        query = urlencode({"model": self.model, "encoding": encoding, "sample_rate": sample_rate})
        connection = await stt_socket.connect(
            f"{self.url}/stt/turns/websocket?{query}",
            self._headers,
            self._timeout_s,
            self._ssl_context,
            service=SERVICE,
            credentials_fix="api_key= a Cartesia API key (play.cartesia.ai/keys)",
        )
        return InkSession(connection)


class InkSession:
    """One connection: audio in with `send`, transcripts out with `receive`, any number of turns."""

    def __init__(self, connection: StampedConnection) -> None:
        self._connection = connection
        self._closed = False

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def send(self, audio: bytes) -> None:
        try:
            await self._connection.send(audio)
        except ConnectionClosed as error:
            raise stt_socket.closed_error(error, SERVICE) from error

    async def receive(self) -> Transcript:
        while True:
            try:
                data = await self._connection.recv()
            except ConnectionClosed as error:
                raise stt_socket.closed_error(error, SERVICE) from error
            at = self._connection.arrival()
            try:
                message = decode_message(data)
            except MalformedMessageError as error:
                raise error_for("malformed", f"{SERVICE}: {error}") from error
            kind = message.get("type")
            if kind in ("turn.update", "turn.end"):
                text = message.get("transcript")
                if not isinstance(text, str):
                    raise error_for("malformed", f"{SERVICE}: {kind} without a transcript string")
                return Transcript(at=at, text=text, final=kind == "turn.end")
            if kind == "error":
                status = message.get("status_code")
                raise error_for(
                    cartesia_api.status_kind("error_event", status),
                    f"{SERVICE}: {cartesia_api.error_text(message)}",
                    status if isinstance(status, int) else None,
                )

    async def close(self) -> None:
        """Say `close` (the API processes the audio it holds) and close the socket."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(ConnectionClosed, OSError):
            await self._connection.send(json.dumps({"type": "close"}))
        await stt_socket.close(self._connection)
