"""The language-model stand-in of `probe serve` (POST /v1/chat/completions) read by the official `openai`
SDK: the reply token by token, never sooner than its schedule, the usage chunk, and errors as the SDK's."""

from __future__ import annotations

import asyncio
import time

import openai
import pytest

from sonic_deploy.standins.llm import REPLY, reply_tokens

from .harness import ReferenceServer, ServerFactory

FIRST_TOKEN_MS, TOKENS_PER_S = 150.0, 200.0
MESSAGES: list[openai.types.chat.ChatCompletionMessageParam] = [
    {"role": "system", "content": "You book tables."},
    {"role": "user", "content": "A table for two at eight, please."},
]


def _server(factory: ServerFactory) -> ReferenceServer:
    return factory("--llm-first-token-ms", str(FIRST_TOKEN_MS), "--llm-tokens-per-s", str(TOKENS_PER_S))


def _sdk(server: ReferenceServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{server.base}/v1", api_key="any", max_retries=0)


def test_the_reply_streams_token_by_token_no_sooner_than_its_schedule(
    reference_server: ServerFactory,
) -> None:
    server = _server(reference_server)

    async def run() -> tuple[list[str], list[float], float, object]:
        async with _sdk(server) as sdk:
            began = time.perf_counter()
            stream = await sdk.chat.completions.create(
                model="stand-in", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
            )
            tokens, arrived, usage = [], [], None
            async for chunk in stream:
                if chunk.usage is not None:
                    usage = chunk.usage
                for choice in chunk.choices:
                    if choice.delta.content:
                        tokens.append(choice.delta.content)
                        arrived.append(time.perf_counter() - began)
            return tokens, arrived, began, usage

    tokens, arrived, _, usage = asyncio.run(run())
    assert tokens == reply_tokens() and "".join(tokens) == REPLY
    # What the server guarantees: a token never before its time (a busy machine makes them later only).
    assert arrived[0] >= FIRST_TOKEN_MS / 1000
    assert arrived[-1] >= FIRST_TOKEN_MS / 1000 + (len(tokens) - 1) / TOKENS_PER_S
    assert usage is not None and getattr(usage, "completion_tokens", None) == len(tokens)


def test_a_whole_completion_without_streaming(reference_server: ServerFactory) -> None:
    server = _server(reference_server)

    async def run() -> str | None:
        async with _sdk(server) as sdk:
            completion = await sdk.chat.completions.create(model="stand-in", messages=MESSAGES)
            return completion.choices[0].message.content

    assert asyncio.run(run()) == REPLY


def test_a_bad_request_is_the_sdks_bad_request_naming_the_field(reference_server: ServerFactory) -> None:
    server = _server(reference_server)

    async def run() -> None:
        async with _sdk(server) as sdk:
            await sdk.chat.completions.create(model="stand-in", messages=[], stream=True)

    with pytest.raises(openai.BadRequestError, match="messages"):
        asyncio.run(run())


def test_a_pace_of_zero_is_refused_by_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    from sonic_deploy.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["probe", "serve", "--llm-tokens-per-s", "0"])
    assert exited.value.code == 2
    assert "--llm-tokens-per-s '0': out of range. Fix: give tokens a second" in capsys.readouterr().err
