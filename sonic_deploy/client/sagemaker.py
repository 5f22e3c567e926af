"""Sonic on a SageMaker endpoint, from asyncio: `InvokeEndpointWithResponseStream` without boto3's threads.

    async with SageMakerClient("sonic-prod", region="us-east-2") as sonic:
        async for chunk in sonic.speak("Hello there.", voice=VOICE_ID, sample_rate=8000, encoding="pcm_mulaw"):
            play(chunk.data)

boto3's request, sent on the event loop. A botocore client of `sagemaker-runtime` (one per process and
place: building one loads the service model) gives the endpoint URL, the signing name, the Region, the
credentials (boto3's chain: environment, profile, SSO, container or instance role; refreshed in a thread
before they expire) and the service model: the headers are the ones its serialiser writes (`Accept`
travels as `X-Amzn-SageMaker-Accept`), the signature is SigV4 (`sigv4.RequestSigner`: what botocore's
signer writes, at a fraction of its CPU), error responses are parsed by botocore's own parser, and its
CA bundle (`AWS_CA_BUNDLE`) and proxy settings (`HTTPS_PROXY`, `NO_PROXY`) apply. The I/O is aiohttp, one
pool of connections per client, and the response is AWS event-stream frames (`eventstream.FrameDecoder`)
around newline-delimited JSON events that the frames may split or pack (`eventstream.LineAssembler`).

The Marketplace container takes one request per utterance (no continuations): an agent sends it whole
sentences. Errors are typed (`ThrottledError` for a 429 or service throttling, `InvalidRequestError`,
`StreamError` once audio has started, ...), each with the `kind` the probe counts it under. Closing the
iterator (`break` inside `contextlib.aclosing`, or cancelling the task) closes the HTTP stream: the
connection is dropped, not returned to the pool with the rest of an utterance in it.
"""

from __future__ import annotations

import base64
import contextlib
import urllib.parse
import uuid
from collections.abc import AsyncGenerator, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import aiohttp
import botocore.session
import orjson

from sonic_deploy.client import cartesia_api
from sonic_deploy.client.aws import (
    StreamingClient,
    default_runtime,
    environ_proxy,
    parsed_error,
    service_runtime,
)
from sonic_deploy.client.cartesia_ws import MalformedMessageError, decode_message
from sonic_deploy.client.errors import (
    AccessError,
    AudioChunk,
    EndpointUnreachableError,
    InvalidRequestError,
    RequestTimeoutError,
    SonicError,
    StreamError,
    ThrottledError,
    error_for,
)
from sonic_deploy.client.eventstream import FrameDecoder, LineAssembler
from sonic_deploy.client.http import READ_ERRORS, Trace, error_body, read_error, stamped_body
from sonic_deploy.client.sigv4 import RequestSigner

if TYPE_CHECKING:
    from sonic_deploy.client.telemetry import Telemetry

OPERATION = "InvokeEndpointWithResponseStream"
_STREAM_ERRORS = {
    "ModelStreamError": "model_stream_error",
    "InternalStreamFailure": "internal_stream_failure",
}
# One family of errors for both routes (errors.py); the SageMaker name for code that only calls SageMaker.
SageMakerError = SonicError
__all__ = [
    "AccessError",
    "AudioChunk",
    "EndpointUnreachableError",
    "InvalidRequestError",
    "RequestTimeoutError",
    "SageMakerClient",
    "SageMakerError",
    "StreamError",
    "ThrottledError",
]


def error_kind(code: str, original_status: object = None) -> str:
    """`model_error_429`, `model_stream_error`, `client_error_ValidationError`... (one naming, every client)."""
    if code == "ModelError":
        return cartesia_api.status_kind("model_error", original_status)
    if code in _STREAM_ERRORS:
        return _STREAM_ERRORS[code]
    return f"client_error_{code}"


class SageMakerClient(StreamingClient):
    """One endpoint's streaming invocations, on one pool of at most `max_connections` connections.

    `session` is a botocore session (default: boto3's, with its credential chain; pass
    `botocore.session.Session(profile="NAME")` for a profile). `connect_timeout_s` bounds a new connection,
    `read_timeout_s` the wait for each next bytes of a stream; a whole utterance has no deadline of its own.
    Use it as an async context manager, or call `close()`; the pool is made on first use, on the loop
    that uses it.
    """

    def __init__(
        self,
        endpoint_name: str,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        session: botocore.session.Session | None = None,
        max_connections: int = 64,
        connect_timeout_s: float = 10.0,
        read_timeout_s: float = 30.0,
        telemetry: Telemetry | None = None,
    ) -> None:
        """`telemetry`: where each utterance's figures go (client/telemetry.py); none when left out."""
        self.telemetry = telemetry
        if not endpoint_name:
            raise ValueError(
                "endpoint_name is empty. Fix: the stack output EndpointName (sonic-deploy connect)"
            )
        runtime = (
            default_runtime("sagemaker-runtime", region, endpoint_url)
            if session is None
            else service_runtime(session, "sagemaker-runtime", region, endpoint_url)
        )
        operation = runtime.service_model.operation_model(OPERATION)
        members = operation.input_shape.members
        # The wire names the serialiser uses: `ContentType` -> Content-Type, `Accept` -> X-Amzn-SageMaker-Accept.
        wire_names = {name: members[name].serialization["name"] for name in ("ContentType", "Accept")}
        self._output_shape = operation.output_shape
        self.endpoint_name, self.region = endpoint_name, runtime.region
        path = f"/endpoints/{urllib.parse.quote(endpoint_name, safe='')}/invocations-response-stream"
        self.url = runtime.endpoint_url + path
        headers = {
            wire_names["ContentType"]: "application/json",
            wire_names["Accept"]: "text/event-stream",
        }
        self._signer = RequestSigner(self.url, headers, runtime.signing_name, runtime.region)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout_s, sock_read=read_timeout_s)
        super().__init__(runtime, max_connections, timeout)
        self._proxy = environ_proxy(self.url)

    async def speak(
        self,
        transcript: str,
        *,
        voice: str | Mapping[str, Any],
        sample_rate: int = 24000,
        encoding: str = "pcm_s16le",
        language: str | None = "en",
        context_id: str | None = None,
        extra: Mapping[str, Any] | None = None,
        wait_timeout_s: float | None = None,
    ) -> AsyncGenerator[AudioChunk]:
        """One utterance's audio, chunk by chunk as it arrives; a typed `SageMakerError` if it fails.
        `wait_timeout_s` bounds its wait for a connection and each wait for its next bytes (default: the
        client's `read_timeout_s` for bytes, and no bound on a wait for a pooled connection)."""
        body = request_body(
            transcript,
            voice=voice,
            sample_rate=sample_rate,
            encoding=encoding,
            language=language,
            context_id=context_id,
            extra=extra,
        )
        request = None if self.telemetry is None else self.telemetry.request(encoding, sample_rate)
        events = self.events(body, wait_timeout_s=wait_timeout_s)
        try:
            async for at, event in events:
                if event.get("type") == "chunk" and event.get("data"):
                    chunk = AudioChunk(_audio(event["data"]), at)
                    if request is not None:
                        request.chunk(chunk)
                    yield chunk
        except Exception as error:
            if request is not None:
                request.end(error)
            raise
        else:
            if request is not None:
                request.end()
        finally:
            await events.aclose()

    async def events(
        self, body: Mapping[str, Any], *, trace: Trace | None = None, wait_timeout_s: float | None = None
    ) -> AsyncGenerator[tuple[float, dict[str, Any]]]:
        """Every JSON event of one request's stream, each with when its bytes arrived, up to and including
        the one that ends it (`done`, or a chunk with `done: true`). `trace` (aiohttp's per-request
        context) gets `connect_s` for a new connection and `sent_at` when the request was written."""
        response = await self._send(body, trace, wait_timeout_s)
        finished = False
        try:
            if response.status != 200:
                raw = await error_body(response)
                raise self.error_response(response.status, response.headers.items(), raw)
            async with contextlib.aclosing(_stream_events(response)) as events:
                async for at, event in events:
                    # Set before the event is handed over: a caller that stops at the last one leaves a
                    # connection that goes back to the pool.
                    finished = event.get("done") is True or event.get("type") == "done"
                    yield at, event
                    if finished:
                        break
            if not finished:
                raise error_for("cut", "stream ended without a done event")
        except READ_ERRORS as error:
            raise read_error(error, wait_timeout_s or self._timeout.sock_read) from error
        finally:
            if finished:  # whatever follows `done` is not the caller's concern, nor any error in it
                self._recycle(response)
            else:  # the rest of the utterance is not wanted: drop the connection with it
                response.close()

    async def _send(
        self, body: Mapping[str, Any], trace: Trace | None = None, wait_timeout_s: float | None = None
    ) -> aiohttp.ClientResponse:
        """One signed invocation, its body not yet read (`events` reads it; so does bench/adapter_cost.py's
        floor, `raw-http`)."""
        payload = orjson.dumps(body)
        headers = self._signer.sign(payload, await self._credentials_here().get())
        where = "the runtime endpoint"
        return await self._post(self.url, payload, headers, where, trace, self._proxy, wait_timeout_s)

    def error_response(self, status: int, headers: Iterable[tuple[str, str]], raw: bytes) -> SageMakerError:
        """An error response, parsed by botocore's own parser with its modelled fields (`OriginalStatusCode`),
        as boto3 parses it."""
        code, message, parsed = parsed_error(self._runtime, self._output_shape, status, headers, raw)
        original = parsed.get("OriginalStatusCode")
        error = error_for(
            error_kind(code, original), message, original if isinstance(original, int) else None
        )
        if status >= 500:  # SageMaker's own InternalFailure or ServiceUnavailable, a proxy's 502 or 503
            error.retryable = True
        return error


async def _stream_events(response: aiohttp.ClientResponse) -> AsyncGenerator[tuple[float, dict[str, Any]]]:
    """Every JSON event of a response body, with when its bytes arrived."""
    frames, lines = FrameDecoder(), LineAssembler()
    async for at, data in stamped_body(response):
        for headers, part in frames.feed(data):
            for event in _payload_events(headers, part, lines):
                yield at, event
    if lines.pending:
        raise error_for("cut", f"stream ended inside an event ({lines.pending[:40]!r})")


def _payload_events(
    headers: Mapping[str, object], payload: bytes, lines: LineAssembler
) -> list[dict[str, Any]]:
    """The JSON events an event-stream message completes; the typed error if it is one, or carries one."""
    kind = headers.get(":message-type")
    if kind == "exception":
        code = str(headers.get(":exception-type") or "unknown")
        raise error_for(error_kind(code), payload.decode(errors="replace")[:300])
    if kind == "error":
        code = str(headers.get(":error-code") or "unknown")
        raise error_for(error_kind(code), str(headers.get(":error-message") or ""))
    if headers.get(":event-type") != "PayloadPart":
        return []
    events = []
    for line in lines.feed(payload):
        try:
            event = decode_message(line)
        except MalformedMessageError as error:
            raise error_for("malformed", str(error)) from error
        if event.get("type") == "error":
            status = event.get("status_code")
            raise error_for(
                cartesia_api.status_kind("error_event", status),
                cartesia_api.error_text(event),
                status if isinstance(status, int) else None,
            )
        events.append(event)
    return events


def _audio(data: object) -> bytes:
    if not isinstance(data, str):
        raise error_for("malformed", f"a chunk's data is not base64 text: {type(data).__name__}")
    try:
        return base64.b64decode(data, validate=True)
    except ValueError as error:
        raise error_for("malformed", f"a chunk's data is not base64: {error}") from error


def request_body(
    transcript: str,
    *,
    voice: str | Mapping[str, Any],
    sample_rate: int = 24000,
    encoding: str = "pcm_s16le",
    language: str | None = "en",
    context_id: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The Marketplace container's request: one utterance, a voice by id, raw audio. `extra` adds fields
    such as `generation_config` or `pronunciation_map` (Sonic 3.5). ValueError names a bad field."""
    output = {"container": "raw", "encoding": encoding, "sample_rate": sample_rate}
    try:
        cartesia_api.check_output_format(output)
        voice_id = cartesia_api.voice_id(dict(voice) if isinstance(voice, Mapping) else voice)
    except cartesia_api.ApiRequestError as error:
        raise ValueError(f"{error}. Fix: see docs/connect.md for what the endpoint accepts") from None
    if not transcript.strip():
        raise ValueError("transcript is empty: there is nothing to speak")
    body: dict[str, Any] = {
        "context_id": context_id or uuid.uuid4().hex,
        "transcript": transcript,
        "voice": {"mode": "id", "id": voice_id},
        "output_format": output,
    }
    if language is not None:
        body["language"] = language  # required by Sonic 3, optional from 3.5
    if extra:
        body.update(extra)
    return body
