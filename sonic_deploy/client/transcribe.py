"""Amazon Transcribe's streaming WebSocket API, as a `turn_hops.SpeechToText`.

    transcribe = TranscribeClient(region="us-east-1")
    async with await transcribe.session(encoding="pcm_s16le", sample_rate=16000) as stt:
        await stt.send(audio)                  # 16-bit PCM at real-time pace
        transcript = await stt.receive()       # IsPartial true: a partial; false: the final

The handshake is `GET wss://transcribestreaming.REGION.amazonaws.com:8443/stream-transcription-websocket`
presigned with SigV4 query parameters (service `transcribe`, valid 300 s; `sigv4.presign_url`), with the
credentials of boto3's chain (`aws.Credentials`) and a fresh signature for every session. Both ways the
messages are AWS event-stream frames: `AudioEvent`s of raw PCM in (an empty one ends the stream),
`TranscriptEvent`s (`Transcript.Results[].Alternatives[0].Transcript`, `IsPartial`) or an exception frame
(`:exception-type` BadRequestException, LimitExceededException...) out. Only 16-bit PCM (`pcm`) is taken
here: the API's other WebSocket encodings, ogg-opus and flac, are not what a call's audio is.
"""

from __future__ import annotations

import contextlib
import json
from collections import deque
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit, urlunsplit

import botocore.session
from websockets.exceptions import ConnectionClosed

from sonic_deploy.client import eventstream, stt_socket
from sonic_deploy.client.aws import Credentials, tls_context
from sonic_deploy.client.cartesia_ws import StampedConnection
from sonic_deploy.client.errors import error_for
from sonic_deploy.client.sigv4 import SigningKey, presign_url
from sonic_deploy.client.turn_hops import Transcript

SERVICE = "Amazon Transcribe"
SIGNING_NAME = "transcribe"
PATH = "/stream-transcription-websocket"
EXPIRES_S = 300
# The stream exceptions' HTTP statuses (API_streaming_TranscriptResultStream in the API reference).
STATUSES = {
    "BadRequestException": 400,
    "ConflictException": 409,
    "LimitExceededException": 429,
    "InternalFailureException": 500,
    "ServiceUnavailableException": 503,
}
_AUDIO_HEADERS = eventstream.encode_headers(
    {":message-type": "event", ":event-type": "AudioEvent", ":content-type": "application/octet-stream"}
)
_SCHEMES = {"ws": "http", "wss": "https", "http": "http", "https": "https"}


def audio_event(audio: bytes) -> bytes:
    return eventstream.encode_frame(_AUDIO_HEADERS, audio)


class TranscribeClient:
    """Sessions on Amazon Transcribe streaming in `region` (else the botocore session's Region: AWS_DEFAULT_REGION,
    AWS_DEFAULT_REGION or the profile's). `endpoint_url` replaces the service's
    (`ws://127.0.0.1:PORT` for `probe serve`); `session` is a botocore session (its credentials, Region and
    CA bundle), else the default one. `connect_timeout_s` bounds the handshake."""

    name = "transcribe"

    def __init__(
        self,
        region: str | None = None,
        *,
        language_code: str = "en-US",
        endpoint_url: str | None = None,
        session: botocore.session.Session | None = None,
        connect_timeout_s: float = 10.0,
    ) -> None:
        session = session or botocore.session.get_session()
        # botocore has no service model for transcribe-streaming: the Region is the session's own setting.
        region = region or session.get_config_variable("region")
        if not region:
            raise ValueError(
                "no AWS Region for Amazon Transcribe. Fix: pass region= (the Region to transcribe in) or "
                "set AWS_DEFAULT_REGION"
            )
        self.region, self.language_code = str(region), language_code
        base = (endpoint_url or f"wss://transcribestreaming.{self.region}.amazonaws.com:8443").rstrip("/")
        parts = urlsplit(base)
        if parts.scheme not in _SCHEMES or not parts.netloc:
            raise ValueError(f"endpoint_url {endpoint_url!r} is not a URL. Fix: wss://HOST[:PORT]")
        # Signed as its http(s) twin, the Host header a WebSocket client sends for it (no default port).
        self._signed_url = urlunsplit((_SCHEMES[parts.scheme], parts.netloc, parts.path + PATH, "", ""))
        self._secure = _SCHEMES[parts.scheme] == "https"
        self._credentials = Credentials(session)
        self._key = SigningKey(SIGNING_NAME, self.region)
        self._ssl_context = tls_context(session) if self._secure else None
        self._timeout_s = connect_timeout_s

    async def session(self, *, encoding: str, sample_rate: int) -> TranscribeSession:
        if encoding != "pcm_s16le":
            raise ValueError(
                f"Amazon Transcribe takes 16-bit PCM (pcm_s16le), not {encoding}. Fix: decode the audio "
                "first (mu-law: sonic_deploy.audio.MULAW_TABLE, or audioop.ulaw2lin) and open the "
                "session with encoding='pcm_s16le'"
            )
        params = {
            "language-code": self.language_code,
            "media-encoding": "pcm",
            "sample-rate": str(sample_rate),
        }
        signed = presign_url(
            self._signed_url,
            params,
            await self._credentials.get(),
            service=SIGNING_NAME,
            region=self.region,
            expires_s=EXPIRES_S,
            key=self._key,
        )
        url = ("wss" if self._secure else "ws") + signed[signed.index(":") :]
        connection = await stt_socket.connect(
            url,
            {},
            self._timeout_s,
            self._ssl_context,
            service=SERVICE,
            credentials_fix="credentials allowed transcribe:StartStreamTranscriptionWebSocket, and a "
            "correct clock (a presigned URL is valid for 300 s)",
        )
        return TranscribeSession(connection)


class TranscribeSession:
    """One stream: audio in with `send`, transcripts out with `receive`, any number of turns (results)."""

    def __init__(self, connection: StampedConnection) -> None:
        self._connection = connection
        self._decoder = eventstream.FrameDecoder()
        self._pending: deque[Transcript] = deque()
        self._closed = False

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def send(self, audio: bytes) -> None:
        if not audio:
            return  # an empty AudioEvent would end the stream: `close` sends that
        try:
            await self._connection.send(audio_event(audio))
        except ConnectionClosed as error:
            raise stt_socket.closed_error(error, SERVICE) from error

    async def receive(self) -> Transcript:
        while not self._pending:
            try:
                data = await self._connection.recv()
            except ConnectionClosed as error:
                raise stt_socket.closed_error(error, SERVICE) from error
            at = self._connection.arrival()
            if isinstance(data, str):
                continue  # the API speaks in binary frames only
            try:
                frames = self._decoder.feed(data)
            except eventstream.FrameError as error:
                raise error_for("malformed", f"{SERVICE}: {error}") from error
            for headers, payload in frames:
                self._read(headers, payload, at)
        return self._pending.popleft()

    def _read(self, headers: dict[str, eventstream.HeaderValue], payload: bytes, at: float) -> None:
        kind = headers.get(":message-type")
        if kind == "exception":
            code = str(headers.get(":exception-type") or "UnknownException")
            raise error_for(f"client_error_{code}", f"{SERVICE}: {_message(payload)}", STATUSES.get(code))
        if kind != "event" or headers.get(":event-type") != "TranscriptEvent":
            return
        try:
            body = json.loads(payload)
            results: list[dict[str, Any]] = body["Transcript"]["Results"]
            for result in results:
                alternatives = result.get("Alternatives") or []
                text = alternatives[0].get("Transcript", "") if alternatives else ""
                if isinstance(text, str) and text:
                    final = result.get("IsPartial") is False
                    self._pending.append(Transcript(at=at, text=text, final=final))
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as error:
            raise error_for(
                "malformed", f"{SERVICE}: a TranscriptEvent that is not one ({error!r})"
            ) from error

    async def close(self) -> None:
        """End the stream (an empty AudioEvent) and close the socket."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(ConnectionClosed, OSError):
            await self._connection.send(audio_event(b""))
        await stt_socket.close(self._connection)


def _message(payload: bytes) -> str:
    try:
        body = json.loads(payload)
    except ValueError:
        return payload.decode(errors="replace")[:300]
    found = body.get("Message") or body.get("message") if isinstance(body, dict) else None
    return str(found) if found else payload.decode(errors="replace")[:300]
