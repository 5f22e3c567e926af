"""The language-model hop of a turn, offline: an OpenAI-compatible `POST /v1/chat/completions` in `probe serve`.

It answers every conversation with the same reply, word by word, its first token `first_token_ms` after
the request arrived and the next ones at `tokens_per_s`, each on its own schedule from the arrival (so a
busy server is late by its own lag, never early). Streamed, it speaks the Chat Completions stream as the
official `openai` SDK reads it: `data: {chat.completion.chunk}` lines, the role with the first token, a
last chunk with `finish_reason`, a usage chunk when `stream_options.include_usage` asks for one, and
`data: [DONE]`. A bad request is a 400 in OpenAI's error shape, naming the field.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from sonic_deploy.event_loop import sleep_until
from sonic_deploy.standins.shared import STANDINS

REPLY = "Sure, your table for two is booked for eight tonight. Is there anything else I can help you with?"


@dataclass(frozen=True)
class LlmConfig:
    first_token_ms: float = 400.0
    tokens_per_s: float = 50.0


def reply_tokens(text: str = REPLY) -> list[str]:
    """The reply's tokens: each word with the space before it, as a tokenizer cuts English text."""
    return re.findall(r"\s*\S+", text)


def due_at(config: LlmConfig, arrived: float, index: int) -> float:
    """When token `index` of a reply is due, on the loop's clock: from the request's arrival, not from the
    token before it, so that a late token does not make every later one late too."""
    return arrived + config.first_token_ms / 1000 + index / config.tokens_per_s


async def until_due(config: LlmConfig, arrived: float, index: int) -> None:
    """Wait for token `index`: the first on the clock (it is the hop a turn measures: on time, not a timer
    late, `event_loop.sleep_until`), the rest on a timer."""
    if index == 0:
        await sleep_until(due_at(config, arrived, 0))
        return
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, due_at(config, arrived, index) - loop.time()))


def prompt_tokens(messages: object) -> int:
    """A stand-in's count of a prompt's tokens: about 4 characters a token (no tokenizer here), for a
    client that reads usage, not a figure to plan costs with."""
    return len(json.dumps(messages)) // 4


def _refused(message: str, param: str | None) -> web.Response:
    error = {"message": message, "type": "invalid_request_error", "param": param, "code": None}
    return web.json_response({"error": error}, status=400)


def _checked(body: object) -> tuple[dict[str, Any] | None, web.Response | None]:
    if not isinstance(body, dict):
        return None, _refused("the body must be a JSON object", None)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return None, _refused("messages: a non-empty list of {role, content} is required", "messages")
    if not isinstance(body.get("model"), str) or not body["model"]:
        return None, _refused("model: a model name is required", "model")
    return body, None


def _chunk(ident: str, created: int, model: str, delta: dict[str, Any], finish: str | None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    chunk = {
        "id": ident,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [choice],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


async def chat_completions(request: web.Request) -> web.StreamResponse:
    loop = asyncio.get_running_loop()
    arrived = loop.time()
    config = request.app[STANDINS].llm
    try:
        body, refusal = _checked(await request.json())
    except ValueError:
        body, refusal = None, _refused("the body is not JSON", None)
    if body is None:
        assert refusal is not None
        return refusal
    tokens, model = reply_tokens(), str(body["model"])
    ident, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    # A stand-in's counts: the reply's tokens as sent, and the prompt's estimate (`prompt_tokens`).
    usage = {"prompt_tokens": prompt_tokens(body["messages"]), "completion_tokens": len(tokens)}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]

    def due(index: int) -> float:
        return due_at(config, arrived, index)

    if not body.get("stream"):
        await asyncio.sleep(max(0.0, due(len(tokens) - 1) - loop.time()))
        message = {"role": "assistant", "content": "".join(tokens)}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        completion = {"id": ident, "object": "chat.completion", "created": created, "model": model}
        return web.json_response({**completion, "choices": [choice], "usage": usage})
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await response.prepare(request)
    for index, token in enumerate(tokens):
        await until_due(config, arrived, index)
        delta = {"role": "assistant", "content": token} if index == 0 else {"content": token}
        await response.write(_chunk(ident, created, model, delta, None))
    await response.write(_chunk(ident, created, model, {}, "stop"))
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        last = {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model}
        await response.write(
            b"data: " + json.dumps({**last, "choices": [], "usage": usage}).encode() + b"\n\n"
        )
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response
