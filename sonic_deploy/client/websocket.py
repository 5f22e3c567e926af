"""The Cartesia WebSocket API (the ECS route's API server, or Cartesia's cloud) for an agent's own code.

    async with WebSocketClient(URL, api_key=KEY, model_id="sonic-3") as sonic:
        async for chunk in sonic.speak("Hello there.", voice=VOICE_ID):
            play(chunk.data)

        async with sonic.utterance(voice=VOICE_ID) as turn:   # an LLM's tokens, as they come
            await turn.send("Your table is ")
            await turn.send("booked for eight.")
            await turn.end()
            async for chunk in turn:
                play(chunk.data)

The protocol is `cartesia_ws`'s (the probe measures through the same code): long-lived pooled sockets
renewed when idle longer than `idle_s` (an NLB drops an idle TCP flow without a word), one context per
utterance, its pieces sent with `continue: true` so that they form one stream, and cancel. Failures are
the typed errors of `errors` (ThrottledError for a 429 or a socket closed with 1013, AccessError for a
refused key...). Leaving an utterance's `async with` before its end cancels it on the server.
"""

from __future__ import annotations

import base64
import ssl
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from sonic_deploy.client import cartesia_api
from sonic_deploy.client.cartesia_ws import (
    Context,
    SocketClosedError,
    SocketPool,
    UnattributableMessageError,
)
from sonic_deploy.client.errors import AudioChunk, SonicError, error_for
from sonic_deploy.client.idle import IdleTimeout

if TYPE_CHECKING:
    from sonic_deploy.client.telemetry import Request, Telemetry


def connect_error_kind(error: BaseException) -> str:
    """How a failed handshake is named: `status_4xx` (the handshake's HTTP status), `tls` (a certificate not
    trusted), `refused`, `timeout`..."""
    if isinstance(error, InvalidStatus):
        return cartesia_api.status_kind("status", error.response.status_code)
    if isinstance(error, ssl.SSLCertVerificationError):  # not retryable: fix the trust, not the network
        return "tls"
    if isinstance(error, ConnectionRefusedError):
        return "refused"
    if isinstance(error, TimeoutError):
        return "timeout"
    return "connect"


def closed_kind(closed: SocketClosedError) -> str:
    """1013 ("try again later") is the server turning the stream away, not a cut."""
    return "closed_1013" if closed.over_capacity else "cut"


def _connect_error(error: BaseException) -> SonicError:
    if isinstance(error, InvalidStatus) and error.response.status_code in (401, 403):
        return error_for(
            "credentials",
            f"the API refused the key (HTTP {error.response.status_code}). Fix: the deployment's API key "
            "(sonic-deploy connect names its secret)",
        )
    if isinstance(error, ssl.SSLCertVerificationError):
        return error_for(
            "tls",
            f"the API's certificate is not trusted ({error.verify_message}). Fix: "
            "ssl_context=ssl.create_default_context(cafile=CA) with the CA that signs it",
        )
    return error_for(connect_error_kind(error), repr(error))


class WebSocketClient:
    """Utterances over pooled sockets to one URL (`wss://` with `ssl_context` for a private CA).

    `cartesia_version` is the API version sent as `Cartesia-Version`: what the server accepts (a
    self-hosted release may accept fewer than the cloud; `sonic-deploy connect` prints the deployment's).
    `contexts_per_socket` above 1 multiplexes utterances on one socket, as the API allows. `timeout_s`
    bounds the handshake and each wait for an utterance's next message (a silent server, or a flow a load
    balancer dropped without a word, is a RequestTimeoutError, not a hang)."""

    def __init__(
        self,
        url: str,
        *,
        api_key: str,
        model_id: str,
        cartesia_version: str = cartesia_api.CURRENT_API_VERSION,
        contexts_per_socket: int = 1,
        idle_s: float = 300.0,
        timeout_s: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        """`telemetry`: where each utterance's figures go (client/telemetry.py); none when left out."""
        self.telemetry = telemetry
        if not url.startswith(("ws://", "wss://")):
            raise ValueError(f"url {url!r} is not a WebSocket URL. Fix: ws://HOST:PORT/tts/websocket")
        self.model_id, self._timeout_s = model_id, timeout_s
        headers = {"X-API-Key": api_key, "Cartesia-Version": cartesia_version}
        self._pool = SocketPool(
            url,
            headers,
            contexts_per_socket=contexts_per_socket,
            idle_s=idle_s,
            timeout_s=timeout_s,
            ssl_context=ssl_context,
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._pool.close()

    def utterance(
        self,
        *,
        voice: str | dict[str, Any],
        sample_rate: int = 24000,
        encoding: str = "pcm_s16le",
        language: str | None = "en",
        max_buffer_delay_ms: int = 0,
        context_id: str | None = None,
    ) -> Utterance:
        """One context, to be sent in pieces. `max_buffer_delay_ms` 0 speaks each piece as it comes (what
        the agent frameworks send); the API's default, 3000, waits for more text up to a sentence's end."""
        output = {"container": "raw", "encoding": encoding, "sample_rate": sample_rate}
        try:
            cartesia_api.check_output_format(output)
            voice_id = cartesia_api.voice_id(voice)
        except cartesia_api.ApiRequestError as error:
            raise ValueError(str(error)) from None
        if not 0 <= max_buffer_delay_ms <= cartesia_api.MAX_BUFFER_DELAY_MS:
            raise ValueError(f"max_buffer_delay_ms {max_buffer_delay_ms} is not within 0-5000")
        template: dict[str, Any] = {
            "model_id": self.model_id,
            "voice": {"mode": "id", "id": voice_id},
            "output_format": output,
            "max_buffer_delay_ms": max_buffer_delay_ms,
        }
        if language is not None:
            template["language"] = language
        return Utterance(
            self._pool, context_id or uuid.uuid4().hex, template, self._timeout_s, self.telemetry
        )

    async def speak(
        self,
        transcript: str,
        *,
        voice: str | dict[str, Any],
        sample_rate: int = 24000,
        encoding: str = "pcm_s16le",
        language: str | None = "en",
    ) -> AsyncGenerator[AudioChunk]:
        """One whole utterance's audio, chunk by chunk as it arrives."""
        if not transcript.strip():
            raise ValueError("transcript is empty: there is nothing to speak")
        async with self.utterance(
            voice=voice, sample_rate=sample_rate, encoding=encoding, language=language
        ) as turn:
            await turn.send(transcript, final=True)
            async for chunk in turn:
                yield chunk


class Utterance:
    """One context: `send` its text in pieces, `end` it, iterate its audio; `cancel` stops it."""

    def __init__(
        self,
        pool: SocketPool,
        context_id: str,
        template: dict[str, Any],
        timeout_s: float,
        telemetry: Telemetry | None = None,
    ) -> None:
        self.id, self._pool, self._template, self._timeout_s = context_id, pool, template, timeout_s
        self._context: Context | None = None
        self._ended = False
        self._telemetry = telemetry
        self._request: Request | None = None  # from the first send

    async def __aenter__(self) -> Self:
        try:
            self._context = await self._pool.open_context(self.id)
        except (OSError, TimeoutError, InvalidHandshake) as error:
            raise _connect_error(error) from error
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        context = self._context
        if context is not None and not (self._ended and context.ended.is_set()):
            await context.cancel()  # left before the end: the server must stop speaking it

    def _opened(self) -> Context:
        if self._context is None:
            raise RuntimeError("use the utterance in `async with client.utterance(...) as turn:`")
        return self._context

    async def send(self, text: str, *, final: bool = False) -> None:
        """A piece of the text (`continue: true`), or the last one (`final`)."""
        await self._send({**self._template, "transcript": text, "continue": not final})
        self._ended = self._ended or final

    async def end(self) -> None:
        """No more text: the audio of what was sent ends with `done`."""
        await self._send({**self._template, "transcript": "", "continue": False})
        self._ended = True

    async def cancel(self) -> None:
        await self._opened().cancel()

    async def _send(self, body: dict[str, Any]) -> None:
        if self._ended:
            raise RuntimeError(f"utterance {self.id} has ended: open another for more text")
        if self._telemetry is not None and self._request is None:
            output = self._template["output_format"]
            self._request = self._telemetry.request(output["encoding"], output["sample_rate"])
        try:
            await self._opened().send(body)
        except ConnectionClosed as error:
            code = error.rcvd.code if error.rcvd is not None else None
            raise error_for(closed_kind(SocketClosedError(code, str(error))), str(error)) from error

    async def __aiter__(self) -> AsyncIterator[AudioChunk]:
        context = self._opened()
        messages = context.messages()
        idle = IdleTimeout(self._timeout_s)
        try:
            while True:
                try:
                    with idle:
                        message, at = await anext(messages)
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    await context.cancel()
                    raise error_for(
                        "timeout", f"no message for utterance {self.id} within {self._timeout_s} s"
                    ) from None
                kind = message.get("type")
                if kind == "chunk" and message.get("data"):
                    chunk = AudioChunk(_audio(message["data"]), at)
                    if self._request is not None:
                        self._request.chunk(chunk)
                    yield chunk
                elif kind == "error":
                    status = message.get("status_code")
                    raise error_for(
                        cartesia_api.status_kind("error_event", status),
                        cartesia_api.error_text(message),
                        status if isinstance(status, int) else None,
                    )
            if self._request is not None:
                self._request.end()
        except SocketClosedError as closed:
            raise self._failed(error_for(closed_kind(closed), str(closed))) from closed
        except UnattributableMessageError as lost:
            raise self._failed(error_for(lost.kind, str(lost))) from lost
        except SonicError as error:
            raise self._failed(error) from None
        finally:
            idle.close()
            await messages.aclose()

    def _failed(self, error: SonicError) -> SonicError:
        if self._request is not None:
            self._request.end(error)
        return error


def _audio(data: object) -> bytes:
    try:
        return base64.b64decode(data if isinstance(data, str) else b"!", validate=True)
    except ValueError as error:
        raise error_for("malformed", f"a chunk's data is not base64: {error}") from error
