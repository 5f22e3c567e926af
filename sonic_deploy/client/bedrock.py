"""A language model on Amazon Bedrock, from asyncio: `ConverseStream` without boto3's threads.

    async with BedrockClient("us.anthropic.claude-3-5-haiku-20241022-v1:0", region="us-east-1") as llm:
        async for token in llm.stream([Message("user", "A table for two, please.")], system=PROMPT):
            speak(token.text)

boto3's request, sent on the event loop, on the same AWS core as the SageMaker client (`client/aws.py`):
a botocore client of `bedrock-runtime` gives the endpoint URL, the signing name (`bedrock`), the Region,
the credentials and the error parser; the path is the service model's `/model/{modelId}/converse-stream`
with the model id percent-encoded as botocore's serialiser encodes it (an ARN's `:` and `/` too), the
body is the JSON its serialiser writes, the signature SigV4 (`sigv4.RequestSigner`). The response is
AWS event-stream frames (`messageStart`, `contentBlockDelta`, `contentBlockStop`, `messageStop`,
`metadata`); each text delta is a `Token` stamped with when its bytes came off the socket.

Errors are typed, each with the `kind` the probe counts it under: `ThrottledError` (status 429) for a
ThrottlingException, before the stream or in it; `InvalidRequestError` for a ValidationException;
`AccessError` for AccessDeniedException and bad or missing credentials; `StreamError` once the stream
broke (modelStreamErrorException, internalServerException, a cut connection, no messageStop). Closing
the iterator early closes the HTTP stream: the connection is dropped, not returned to the pool with the
rest of a reply in it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Iterable, Mapping, Sequence
from typing import Any

import aiohttp
import botocore.session
import orjson
import yarl
from botocore.utils import percent_encode

from sonic_deploy.client.aws import (
    StreamingClient,
    default_runtime,
    environ_proxy,
    parsed_error,
    service_runtime,
)
from sonic_deploy.client.errors import SonicError, error_for
from sonic_deploy.client.eventstream import FrameDecoder, HeaderValue
from sonic_deploy.client.http import READ_ERRORS, Trace, error_body, read_error, stamped_body
from sonic_deploy.client.sigv4 import RequestSigner
from sonic_deploy.client.turn_hops import Message, Token

OPERATION = "ConverseStream"
# In-stream failures that mean the stream broke (part of the reply may have come): named as SageMaker's.
_STREAM_ERRORS = {
    "ModelStreamErrorException": "model_stream_error",
    "InternalServerException": "internal_stream_failure",
}


def error_kind(code: str, *, in_stream: bool = False) -> str:
    """`client_error_ThrottlingException`, `model_stream_error`... (one naming, every client). In the
    stream the service model names its exceptions in lower camel case (`throttlingException`): they are
    named here as the same exception in an HTTP response is."""
    code = code[:1].upper() + code[1:]
    if in_stream and code in _STREAM_ERRORS:
        return _STREAM_ERRORS[code]
    return f"client_error_{code}"


def request_body(
    messages: Sequence[Message],
    system: str | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
) -> dict[str, Any]:
    """ConverseStream's body as botocore's serialiser writes it (the model id travels in the path)."""
    body: dict[str, Any] = {
        "messages": [{"role": message.role, "content": [{"text": message.content}]} for message in messages]
    }
    if system:
        body["system"] = [{"text": system}]
    inference: dict[str, Any] = {}
    if max_tokens:  # None or 0: the model's own limit
        inference["maxTokens"] = max_tokens
    if temperature is not None:
        inference["temperature"] = temperature
    if inference:
        body["inferenceConfig"] = inference
    return body


class BedrockClient(StreamingClient):
    """One model's streaming conversations (`LanguageModel`), on one pool of at most `max_connections`.

    `model_id` is a model id, an inference profile's id or any of their ARNs; `session` a botocore session
    (default: boto3's, with its credential chain). `max_tokens` and `temperature` go in every request's
    `inferenceConfig` when given. `connect_timeout_s` bounds a new connection, `read_timeout_s` the wait
    for each next bytes of a stream; a whole reply has no deadline of its own. Use it as an async context
    manager, or call `close()`; the pool is made on first use, on the loop that uses it.
    """

    name = "bedrock"

    def __init__(
        self,
        model_id: str,
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        session: botocore.session.Session | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        max_connections: int = 64,
        connect_timeout_s: float = 10.0,
        read_timeout_s: float = 30.0,
    ) -> None:
        if not model_id:
            raise ValueError("model_id is empty. Fix: a Bedrock model id or inference profile id")
        if max_tokens is not None and max_tokens < 0:
            raise ValueError(f"max_tokens must be 0 (none sent) or more, not {max_tokens}")
        runtime = (
            default_runtime("bedrock-runtime", region, endpoint_url)
            if session is None
            else service_runtime(session, "bedrock-runtime", region, endpoint_url)
        )
        operation = runtime.service_model.operation_model(OPERATION)
        self._output_shape = operation.output_shape
        self.model_id, self.region = model_id, runtime.region
        self.max_tokens, self.temperature = max_tokens, temperature
        # The path as botocore renders it: `{modelId}` is not greedy, so every reserved character is
        # encoded (`:` and `/` of an ARN too); aiohttp must send it as it is, not decode it again.
        path = operation.http["requestUri"].format(modelId=percent_encode(model_id))
        self.url = runtime.endpoint_url + path
        self._signer = RequestSigner(
            self.url, {"Content-Type": "application/json"}, runtime.signing_name, runtime.region
        )
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout_s, sock_read=read_timeout_s)
        super().__init__(runtime, max_connections, timeout)
        self._proxy = environ_proxy(self.url)

    def request_body(self, messages: Sequence[Message], system: str | None = None) -> dict[str, Any]:
        return request_body(messages, system, self.max_tokens, self.temperature)

    async def stream(
        self, messages: Sequence[Message], *, system: str | None = None, trace: Trace | None = None
    ) -> AsyncGenerator[Token]:
        """The reply to `messages`, token by token as its bytes arrive, to the end of the message; a typed
        `SonicError` if the request fails or the stream breaks. `trace` (aiohttp's per-request context)
        gets `connect_s` for a new connection and `sent_at` when the request was written."""
        payload = orjson.dumps(self.request_body(messages, system))
        headers = self._signer.sign(payload, await self._credentials_here().get())
        url = yarl.URL(self.url, encoded=True)  # as botocore quotes it: aiohttp would decode %3A again
        response = await self._post(url, payload, headers, "Bedrock Runtime", trace, self._proxy)
        finished = False
        try:
            if response.status != 200:
                raw = await error_body(response)
                raise self.error_response(response.status, response.headers.items(), raw)
            async with contextlib.aclosing(_stream_events(response)) as events:
                async for at, kind, event in events:
                    if kind == "contentBlockDelta":
                        delta = event.get("delta") if isinstance(event, dict) else None
                        if not isinstance(delta, dict):
                            raise error_for(
                                "malformed", f"a contentBlockDelta without a delta object: {event!r:.80}"
                            )
                        text = delta.get("text")
                        if isinstance(text, str) and text:
                            yield Token(at, text)
                    elif kind in ("messageStop", "metadata"):
                        finished = True  # the metadata that follows is drained in the background
                        break
            if not finished:
                raise error_for("cut", "stream ended without messageStop")
        except READ_ERRORS as error:
            raise read_error(error) from error
        finally:
            if finished:
                self._recycle(response)
            else:  # the rest of the reply is not wanted: drop the connection with it
                response.close()

    def error_response(self, status: int, headers: Iterable[tuple[str, str]], raw: bytes) -> SonicError:
        """An error response, parsed by botocore's own parser, as boto3 parses it."""
        code, message, _ = parsed_error(self._runtime, self._output_shape, status, headers, raw)
        error = error_for(error_kind(code), message)
        if status >= 500:  # InternalServerException, ServiceUnavailableException, a proxy's 502 or 503
            error.retryable = True
        return error


async def _stream_events(
    response: aiohttp.ClientResponse,
) -> AsyncGenerator[tuple[float, str, dict[str, Any]]]:
    """Every event of a ConverseStream body, by its `:event-type`, with when its bytes arrived; the typed
    error for an exception in the stream."""
    frames = FrameDecoder()
    async for at, data in stamped_body(response):
        for headers, part in frames.feed(data):
            kind, event = _event(headers, part)
            yield at, kind, event


def _event(headers: Mapping[str, HeaderValue], payload: bytes) -> tuple[str, dict[str, Any]]:
    kind = headers.get(":message-type")
    if kind == "error":
        code = str(headers.get(":error-code") or "unknown")
        raise error_for(error_kind(code, in_stream=True), str(headers.get(":error-message") or ""))
    try:
        event = orjson.loads(payload) if payload else {}
    except orjson.JSONDecodeError as error:
        raise error_for("malformed", f"an event that is not JSON: {payload[:80]!r}") from error
    if not isinstance(event, dict):
        raise error_for("malformed", f"an event that is not a JSON object: {payload[:80]!r}")
    if kind == "exception":
        code = str(headers.get(":exception-type") or "unknown")
        message = event.get("message") or event.get("Message") or payload.decode(errors="replace")[:300]
        raise error_for(error_kind(code, in_stream=True), str(message))
    return str(headers.get(":event-type") or ""), event
