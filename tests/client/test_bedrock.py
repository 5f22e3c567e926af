"""The Bedrock client against `probe serve` and against small servers of errors: the reply token by token
and never early, a conversation with a system prompt, typed errors (before the stream and in it), never
a hang; and its request equal to boto3's for the same call, path, headers, signature and body."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import boto3
import botocore.session
import pytest
from aiohttp import web
from botocore.credentials import ReadOnlyCredentials
from botocore.exceptions import ClientError, EventStreamError

from sonic_deploy.client import (
    AccessError,
    BedrockClient,
    EndpointUnreachableError,
    InvalidRequestError,
    SonicError,
    StreamError,
    ThrottledError,
)
from sonic_deploy.client.turn_hops import LanguageModel, Message, Token
from sonic_deploy.standins.bedrock import event, stream_exception
from sonic_deploy.standins.llm import REPLY, reply_tokens
from tests.standins.harness import ReferenceServer, ServerFactory

FIRST_TOKEN_MS, TOKENS_PER_S = 200.0, 200.0
MODEL = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
PROFILE_ARN = (
    "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-haiku-20241022-v1:0"
)
CONVERSATION = [
    Message("user", "A table for two, please."),
    Message("assistant", "For what time?"),
    Message("user", "Eight tonight."),
]
SYSTEM = "You book tables."
# Every call here is bounded: a client that hangs fails its test instead of the suite.
BOUND_S = 20.0


def _standin(factory: ServerFactory) -> ReferenceServer:
    return factory("--llm-first-token-ms", str(FIRST_TOKEN_MS), "--llm-tokens-per-s", str(TOKENS_PER_S))


def _client(base: str, model: str = MODEL, **options: Any) -> BedrockClient:
    return BedrockClient(model, region="us-east-1", endpoint_url=base, **options)


async def _tokens(llm: LanguageModel, messages: list[Message], system: str | None = None) -> list[Token]:
    async with asyncio.timeout(BOUND_S):
        return [token async for token in llm.stream(messages, system=system)]


async def _once(llm: BedrockClient, messages: list[Message]) -> list[Token]:
    async with llm:
        return await _tokens(llm, messages)


def test_the_reply_streams_in_order_and_no_token_comes_early(reference_server: ServerFactory) -> None:
    server = _standin(reference_server)

    async def run() -> tuple[float, list[Token]]:
        async with _client(server.base, max_tokens=200, temperature=0.2) as llm:
            began = time.perf_counter()
            return began, await _tokens(llm, CONVERSATION, SYSTEM)

    began, tokens = asyncio.run(run())
    assert [token.text for token in tokens] == reply_tokens() and "".join(t.text for t in tokens) == REPLY
    assert [token.at for token in tokens] == sorted(token.at for token in tokens)
    # What the server guarantees: never before its schedule; the upper bound only catches a stall.
    assert FIRST_TOKEN_MS / 1000 <= tokens[0].at - began < FIRST_TOKEN_MS / 1000 + 2.0
    assert tokens[-1].at - began >= FIRST_TOKEN_MS / 1000 + (len(tokens) - 1) / TOKENS_PER_S


def test_replies_in_a_row_on_one_connection_and_an_inference_profile_arn(
    reference_server: ServerFactory,
) -> None:
    server = _standin(reference_server)

    async def run() -> list[str]:
        async with _client(server.base, PROFILE_ARN, max_connections=1) as llm:
            replies = []
            for turn in range(3):
                tokens = await _tokens(llm, CONVERSATION[: 2 * turn + 1], SYSTEM if turn else None)
                replies.append("".join(token.text for token in tokens))
            return replies

    assert asyncio.run(run()) == [REPLY] * 3


def test_closing_the_stream_early_ends_the_request_and_the_next_one_is_whole(
    reference_server: ServerFactory,
) -> None:
    server = _standin(reference_server)

    async def run() -> tuple[str, list[str]]:
        async with _client(server.base, max_connections=1) as llm:
            async with asyncio.timeout(BOUND_S), contextlib.aclosing(llm.stream(CONVERSATION)) as stream:
                async for token in stream:
                    first = token.text
                    break
            return first, [token.text for token in await _tokens(llm, CONVERSATION)]

    first, again = asyncio.run(run())
    assert first == reply_tokens()[0] and again == reply_tokens()


def test_a_request_the_service_refuses_is_an_invalid_request_error(reference_server: ServerFactory) -> None:
    server = _standin(reference_server)
    with pytest.raises(InvalidRequestError) as raised:
        asyncio.run(_once(_client(server.base), []))
    assert raised.value.kind == "client_error_ValidationException" and "messages" in raised.value.message
    assert not raised.value.retryable


# Small servers of errors, in the shapes botocore parses (boto3 reads the throttling ones below).
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _error(status: int, code: str, message: str) -> Handler:
    async def answer(request: web.Request) -> web.StreamResponse:
        headers = {"x-amzn-errortype": f"{code}:http://internal.amazon.com/coral/com.amazon.bedrock/"}
        return web.json_response({"message": message}, status=status, headers=headers)

    return answer


def _stream(*frames: bytes) -> Handler:
    async def answer(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/vnd.amazon.eventstream"})
        await response.prepare(request)
        for frame in frames:
            await response.write(frame)
        await response.write_eof()
        return response

    return answer


async def _hang(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/vnd.amazon.eventstream"})
    await response.prepare(request)
    await response.write(event("messageStart", {"role": "assistant"}))
    await asyncio.sleep(BOUND_S * 2)
    return response


_START = event("messageStart", {"role": "assistant"}) + event(
    "contentBlockDelta", {"delta": {"text": "Sure"}, "contentBlockIndex": 0}
)
ERRORS: dict[str, Handler] = {
    "throttled": _error(429, "ThrottlingException", "Too many requests, please wait before trying again."),
    "throttled-in-stream": _stream(_START, stream_exception("throttlingException", "Too many tokens")),
    "validation": _error(400, "ValidationException", "The provided model identifier is invalid."),
    "denied": _error(403, "AccessDeniedException", "You don't have access to the model"),
    "not-ready": _error(429, "ModelNotReadyException", "The model is not ready"),
    "unavailable": _error(503, "ServiceUnavailableException", "Service unavailable"),
    "internal": _error(500, "InternalServerException", "Internal error"),
    "stream-error": _stream(_START, stream_exception("modelStreamErrorException", "The model broke")),
    "cut": _stream(_START),
    "not-eventstream": _stream(b"not a frame at all, just bytes"),
    "slow": _hang,
}


@contextlib.asynccontextmanager
async def _serving(handlers: dict[str, Handler]) -> AsyncIterator[str]:
    async def route(request: web.Request) -> web.StreamResponse:
        return await handlers[request.match_info["model"]](request)

    app = web.Application()
    app.router.add_post("/model/{model}/converse-stream", route)
    runner = web.AppRunner(app, handler_cancellation=True)  # a hanging handler ends with its client
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def _failure(model: str, **options: Any) -> tuple[SonicError, list[Token]]:
    async def run() -> tuple[SonicError, list[Token]]:
        async with _serving(ERRORS) as base, _client(base, model, **options) as llm:
            got: list[Token] = []
            try:
                async with asyncio.timeout(BOUND_S):
                    async for token in llm.stream(CONVERSATION):
                        got.append(token)
            except SonicError as error:
                return error, got
            raise AssertionError(f"no error from {model}: {got}")

    return asyncio.run(run())


@pytest.mark.parametrize(
    ("model", "cls", "kind", "retryable"),
    [
        ("throttled", ThrottledError, "client_error_ThrottlingException", True),
        ("throttled-in-stream", ThrottledError, "client_error_ThrottlingException", True),
        ("validation", InvalidRequestError, "client_error_ValidationException", False),
        ("denied", AccessError, "client_error_AccessDeniedException", False),
        ("not-ready", SonicError, "client_error_ModelNotReadyException", True),
        ("unavailable", SonicError, "client_error_ServiceUnavailableException", True),
        ("internal", SonicError, "client_error_InternalServerException", True),
        ("stream-error", StreamError, "model_stream_error", True),
        ("cut", StreamError, "cut", True),
        ("not-eventstream", StreamError, "malformed", True),
    ],
)
def test_each_error_is_typed_with_its_kind(
    model: str, cls: type[SonicError], kind: str, retryable: bool
) -> None:
    error, tokens = _failure(model)
    assert (type(error), error.kind, error.retryable) == (cls, kind, retryable)
    if cls is ThrottledError:
        assert error.status == 429
    if model.endswith("in-stream") or model in ("stream-error", "cut"):
        assert [token.text for token in tokens] == ["Sure"]  # what came before the break was delivered


def test_no_bytes_within_the_read_timeout_is_a_timeout_not_a_hang() -> None:
    error, _ = _failure("slow", read_timeout_s=0.5)
    assert error.kind == "timeout" and error.retryable


def test_a_refused_connection_is_an_unreachable_endpoint() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    with pytest.raises(EndpointUnreachableError) as raised:
        asyncio.run(_once(_client(f"http://127.0.0.1:{port}"), CONVERSATION))
    assert raised.value.kind == "refused" and raised.value.retryable


def test_boto3_reads_the_error_servers_shapes_as_the_client_does() -> None:
    """The shapes above are Bedrock's as botocore reads them: the test servers are not the client's own
    idea of an error."""

    async def run() -> list[tuple[str, str]]:
        async with _serving(ERRORS) as base:
            client = boto3.client("bedrock-runtime", endpoint_url=base, region_name="us-east-1")

            def call(model: str) -> tuple[str, str]:
                try:
                    for _ in client.converse_stream(modelId=model, messages=[])["stream"]:
                        pass
                except (ClientError, EventStreamError) as error:
                    return error.response["Error"]["Code"], error.response["Error"]["Message"]
                raise AssertionError(f"boto3 read no error from {model}")

            return [await asyncio.to_thread(call, model) for model in ("throttled", "throttled-in-stream")]

    assert asyncio.run(run()) == [
        ("ThrottlingException", "Too many requests, please wait before trying again."),
        ("throttlingException", "Too many tokens"),
    ]


# Request equivalence: the client's request and boto3's, captured at one server.
Captured = tuple[str, dict[str, str], bytes]


@pytest.mark.parametrize("model", [MODEL, PROFILE_ARN])
def test_the_request_is_boto3s_path_headers_signature_and_body(model: str) -> None:
    seen: list[Captured] = []

    async def capture(request: web.Request) -> web.StreamResponse:
        seen.append((request.raw_path, dict(request.headers), await request.read()))
        return await _error(400, "ValidationException", "captured")(request)

    async def run() -> BedrockClient:
        app = web.Application()
        app.router.add_post("/{tail:.*}", capture)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        base = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"  # type: ignore[union-attr]
        try:
            # Both sides with the same static keys, from sessions of their own: what earlier tests left in
            # boto3's and botocore's default sessions (a session token, say) must not differ between them.
            boto = boto3.Session(
                aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
            ).client("bedrock-runtime", endpoint_url=base)
            ours = botocore.session.Session()
            ours.set_credentials("testing", "testing")

            def boto_call() -> None:
                with pytest.raises(ClientError):
                    boto.converse_stream(
                        modelId=model,
                        messages=[{"role": m.role, "content": [{"text": m.content}]} for m in CONVERSATION],
                        system=[{"text": SYSTEM}],
                        inferenceConfig={"maxTokens": 256, "temperature": 0.3},
                    )

            await asyncio.to_thread(boto_call)
            llm = _client(base, model, max_tokens=256, temperature=0.3, session=ours)
            with pytest.raises(InvalidRequestError):
                await _tokens(llm, CONVERSATION, SYSTEM)
            await llm.close()
            return llm
        finally:
            await runner.cleanup()

    llm = asyncio.run(run())
    (boto_path, boto_headers, boto_body), (our_path, our_headers, our_body) = seen
    assert our_path == boto_path and "%3A" in our_path
    assert json.loads(our_body) == json.loads(boto_body)

    def that_matter(headers: dict[str, str]) -> dict[str, str]:
        return {
            k.lower(): v
            for k, v in headers.items()
            if k.lower() == "content-type" or k.lower().startswith("x-amz-")
        }

    def signed(headers: dict[str, str]) -> tuple[str, str]:
        credential, names = headers["Authorization"].split(", ")[:2]
        return credential.split("/", 1)[1], names

    ours, theirs = that_matter(our_headers), that_matter(boto_headers)
    assert ours.keys() == theirs.keys() and ours["content-type"] == theirs["content-type"]
    assert signed(our_headers) == signed(boto_headers)
    # The same signature as botocore's for boto3's body at boto3's moment: the path is canonical alike.
    moment = datetime.datetime.strptime(boto_headers["X-Amz-Date"], "%Y%m%dT%H%M%SZ").replace(
        tzinfo=datetime.UTC
    )
    again = llm._signer.sign(boto_body, ReadOnlyCredentials("testing", "testing", None), now=moment)
    assert again["Authorization"] == boto_headers["Authorization"]
