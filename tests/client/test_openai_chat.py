"""The OpenAI-compatible client: against the LLM stand-in of `probe serve`, and against the failures a real
endpoint gives (a small aiohttp server answering in OpenAI's error shape)."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web

from sonic_deploy.client.errors import (
    AccessError,
    EndpointUnreachableError,
    InvalidRequestError,
    SonicError,
    StreamError,
    ThrottledError,
)
from sonic_deploy.client.openai_chat import OpenAIChatClient
from sonic_deploy.client.turn_hops import Message, Token
from sonic_deploy.standins.llm import REPLY
from tests.standins.harness import ServerFactory

ASK = [Message("user", "A table for two tonight?")]


async def _tokens(
    client: OpenAIChatClient, messages: list[Message] = ASK, system: str | None = None
) -> list[Token]:
    try:
        async with asyncio.timeout(20):
            return [token async for token in client.stream(messages, system=system)]
    finally:
        await client.close()


def test_the_reply_streams_token_by_token_after_the_first_token_delay(
    reference_server: ServerFactory,
) -> None:
    server = reference_server("--llm-first-token-ms", "150", "--llm-tokens-per-s", "200")
    client = OpenAIChatClient(f"{server.base}/v1", model="stand-in")

    async def run() -> tuple[float, list[Token]]:
        sent = time.perf_counter()
        return sent, await _tokens(
            client, [*ASK, Message("assistant", "Yes."), Message("user", "At eight.")], "brief"
        )

    sent, tokens = asyncio.run(run())
    assert "".join(token.text for token in tokens) == REPLY
    assert len(tokens) == len(REPLY.split())
    stamps = [token.at for token in tokens]
    assert stamps == sorted(stamps)
    assert tokens[0].at - sent >= 0.150  # the stand-in is never early
    assert tokens[-1].at - sent >= 0.150 + (len(tokens) - 1) / 200  # each token on its own schedule


def test_the_url_and_body_from_the_settings() -> None:
    client = OpenAIChatClient("http://127.0.0.1:1/v1/", model="m", max_tokens=50, temperature=0.2)
    assert client.url == "http://127.0.0.1:1/v1/chat/completions"
    assert client.body(ASK, "brief") == {
        "model": "m",
        "messages": [{"role": "system", "content": "brief"}, {"role": "user", "content": ASK[0].content}],
        "stream": True,
        "max_tokens": 50,
        "temperature": 0.2,
    }


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def _serving(handler: Handler) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        await runner.cleanup()


def _refusing(status: int, message: str) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.json_response({"error": {"message": message, "type": "x", "code": None}}, status=status)

    return handler


def _streaming(*lines: bytes) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for line in lines:
            await response.write(line)
        return response

    return handler


def _error_of(handler: Handler, read_timeout_s: float = 30.0) -> SonicError:
    async def run() -> SonicError:
        async with _serving(handler) as url:
            client = OpenAIChatClient(url, model="m", read_timeout_s=read_timeout_s)
            with pytest.raises(SonicError) as raised:
                await _tokens(client)
            return raised.value

    return asyncio.run(run())


CHUNK = b'data: {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}\n\n'


@pytest.mark.parametrize(
    ("handler", "kind", "cls", "says"),
    [
        (_refusing(429, "Rate limit reached"), "status_429", ThrottledError, "Rate limit reached"),
        (_refusing(401, "Incorrect API key"), "credentials", AccessError, "HTTP 401: Incorrect API key"),
        (_refusing(400, "messages: required"), "status_400", InvalidRequestError, "messages: required"),
        (_refusing(503, "overloaded"), "status_5xx", SonicError, "overloaded"),
        (_streaming(CHUNK), "cut", StreamError, "without data: [DONE]"),
        (_streaming(CHUNK, b"data: {not json\n\n"), "malformed", StreamError, "not JSON"),
        (
            _streaming(b'data: {"error": {"message": "context too long"}}\n\n'),
            "stream_error",
            SonicError,
            "context too long",
        ),
    ],
    ids=["429", "401", "400", "503", "cut", "malformed", "error-in-stream"],
)
def test_each_failure_is_typed_with_its_message(
    handler: Handler, kind: str, cls: type[SonicError], says: str
) -> None:
    error = _error_of(handler)
    assert type(error) is cls and error.kind == kind
    assert says in error.message
    assert error.retryable == (kind in ("status_429", "status_5xx", "cut", "malformed"))


def test_a_server_that_goes_quiet_is_a_timeout_not_a_hang() -> None:
    async def quiet(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(CHUNK)
        await asyncio.sleep(2)  # well past the client's read timeout (the server's clean-up waits for it)
        return response

    error = _error_of(quiet, read_timeout_s=0.3)
    assert error.kind == "timeout"


def test_nothing_listening_is_unreachable() -> None:
    async def run() -> SonicError:
        client = OpenAIChatClient("http://127.0.0.1:9/v1", model="m")
        with pytest.raises(SonicError) as raised:
            await _tokens(client)
        return raised.value

    error = asyncio.run(run())
    assert isinstance(error, EndpointUnreachableError) and error.kind == "refused"


@pytest.mark.parametrize(
    ("url", "model", "says"),
    [("api.openai.com/v1", "m", "not an http(s)://"), ("http://x/v1", "", "model is empty")],
)
def test_a_bad_setting_is_refused_with_the_fix(url: str, model: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)):
        OpenAIChatClient(url, model=model)


def test_a_reply_whose_body_ends_after_done_leaves_its_connection_for_the_next() -> None:
    peers: set[object] = set()

    async def late_end(request: web.Request) -> web.StreamResponse:
        peers.add(request.transport.get_extra_info("peername") if request.transport else None)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(CHUNK + b"data: [DONE]\n\n")
        await asyncio.sleep(0.05)  # the chunked body's last chunk comes later than [DONE]
        await response.write_eof()
        return response

    async def run() -> list[list[Token]]:
        async with _serving(late_end) as url:
            client = OpenAIChatClient(url, model="m")
            try:
                replies = []
                for _ in range(3):
                    replies.append([token async for token in client.stream(ASK)])
                    await asyncio.sleep(0.1)  # the body has ended meanwhile
                return replies
            finally:
                await client.close()

    replies = asyncio.run(run())
    assert [[token.text for token in reply] for reply in replies] == [["Hi"]] * 3
    assert len(peers) == 1  # one connection for the three replies


def test_the_request_is_the_official_sdks_path_headers_and_body() -> None:
    """The same conversation through the `openai` SDK and through the client, captured at one server."""
    import openai

    seen: list[tuple[str, dict[str, str], Any]] = []

    async def capture(request: web.Request) -> web.StreamResponse:
        seen.append((request.path, dict(request.headers), await request.json()))
        return await _streaming(CHUNK + b"data: [DONE]\n\n")(request)

    async def run() -> None:
        async with _serving(capture) as url:
            sdk = openai.AsyncOpenAI(base_url=url, api_key="key", max_retries=0)
            stream = await sdk.chat.completions.create(
                model="m",
                messages=[
                    {"role": "system", "content": "brief"},
                    {"role": "user", "content": ASK[0].content},
                ],
                stream=True,
                max_tokens=50,
                temperature=0.2,
            )
            async for _ in stream:
                pass
            await sdk.close()
            await _tokens(
                OpenAIChatClient(url, model="m", api_key="key", max_tokens=50, temperature=0.2), ASK, "brief"
            )

    asyncio.run(run())
    (sdk_path, sdk_headers, sdk_body), (our_path, our_headers, our_body) = seen
    assert our_path == sdk_path == "/v1/chat/completions"
    assert our_body == sdk_body
    for name in ("Authorization", "Content-Type"):
        assert our_headers[name] == sdk_headers[name]
