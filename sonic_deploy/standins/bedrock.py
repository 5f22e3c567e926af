"""The language-model hop of a turn on Amazon Bedrock, offline: `ConverseStream` and `Converse` in `probe serve`.

`POST /model/{modelId}/converse-stream` answers as Bedrock Runtime does, in the shapes of botocore's
service model: AWS event-stream frames (`messageStart`, then a `contentBlockDelta` for each token,
`contentBlockStop`, `messageStop`, `metadata`), read by boto3's own `converse_stream` in the tests.
`POST /model/{modelId}/converse` answers the whole reply at once. The reply and its pace are the OpenAI
stand-in's (`llm`: the same `LlmConfig` and `reply_tokens()`, each token due on its schedule
from the request's arrival, so a busy server is late, never early), so that the two language-model
routes measure alike. A request without an Authorization header is refused (403), but its signature is
not checked (any keys sign); a bad body is a 400 ValidationException naming the field, as botocore
parses it.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from aiohttp import web

from sonic_deploy.client import eventstream
from sonic_deploy.standins.llm import due_at, prompt_tokens, reply_tokens, until_due
from sonic_deploy.standins.shared import STANDINS

_ROLES = ("user", "assistant")


def _error(status: int, code: str, message: str) -> web.Response:
    """An error as rest-json services send it: the code in `x-amzn-errortype`, `{"message"}` in the body."""
    headers = {"x-amzn-errortype": code, "x-amzn-RequestId": str(uuid.uuid4())}
    return web.json_response({"message": message}, status=status, headers=headers)


def _invalid(message: str) -> web.Response:
    return _error(400, "ValidationException", message)


def _text_blocks(blocks: object, where: str) -> str | None:
    """What is wrong with a list of content blocks (the stand-in reads text blocks only), or None."""
    if not isinstance(blocks, list) or not blocks:
        return f"{where}: a non-empty list of content blocks is required"
    for index, block in enumerate(blocks):
        if not isinstance(block, dict) or not isinstance(block.get("text"), str):
            return f'{where}.{index}: a content block of the form {{"text": ...}} is required'
        if not block["text"].strip():  # Bedrock's own words for it (boto/botocore#3525)
            return f"The text field in the ContentBlock object at {where}.{index} is blank"
    return None


def _problem(body: object) -> str | None:
    """What is wrong with a Converse request's body, named as Bedrock names its fields, or None."""
    if not isinstance(body, dict):
        return "the request body must be a JSON object"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: a non-empty list of {role, content} is required"
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            return f"messages.{index}.role: one of {', '.join(_ROLES)} is required"
        # The Converse API wants a conversation that starts with the user and alternates.
        if message["role"] != ("user" if index % 2 == 0 else "assistant"):
            return (
                "A conversation must start with a user message and alternate between user and assistant roles"
            )
        problem = _text_blocks(message.get("content"), f"messages.{index}.content")
        if problem is not None:
            return problem
    if "system" in body:
        problem = _text_blocks(body["system"], "system")
        if problem is not None:
            return problem
    if "inferenceConfig" in body and not isinstance(body["inferenceConfig"], dict):
        return "inferenceConfig: an object is required"
    return None


async def _request(request: web.Request) -> tuple[dict[str, Any] | None, web.Response | None]:
    if not request.headers.get("Authorization"):
        return None, _error(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
    try:
        body = await request.json()
    except ValueError:
        return None, _invalid("the request body is not JSON")
    problem = _problem(body)
    if problem is not None:
        return None, _invalid(problem)
    return body, None


def _usage(body: dict[str, Any], tokens: list[str]) -> dict[str, int]:
    usage = {"inputTokens": prompt_tokens(body["messages"]), "outputTokens": len(tokens)}
    usage["totalTokens"] = usage["inputTokens"] + usage["outputTokens"]
    return usage


def event(kind: str, payload: dict[str, Any]) -> bytes:
    """One event of a ConverseStream response (`messageStart`, `contentBlockDelta`...)."""
    headers = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
    return eventstream.encode_frame(headers, json.dumps(payload).encode())


def stream_exception(kind: str, message: str) -> bytes:
    """An error in the stream, named as the service model names it (`throttlingException`,
    `modelStreamErrorException`...)."""
    headers = {":exception-type": kind, ":content-type": "application/json", ":message-type": "exception"}
    return eventstream.encode_frame(headers, json.dumps({"message": message}).encode())


async def converse_stream(request: web.Request) -> web.StreamResponse:
    loop = asyncio.get_running_loop()
    arrived = loop.time()
    config = request.app[STANDINS].llm
    body, refusal = await _request(request)
    if body is None:
        assert refusal is not None
        return refusal
    tokens = reply_tokens()
    response = web.StreamResponse(
        headers={"Content-Type": eventstream.CONTENT_TYPE, "x-amzn-RequestId": str(uuid.uuid4())}
    )
    await response.prepare(request)
    for index, token in enumerate(tokens):
        await until_due(config, arrived, index)  # as the OpenAI stand-in's tokens are
        frame = event("contentBlockDelta", {"delta": {"text": token}, "contentBlockIndex": 0})
        if index == 0:  # the start of the message comes with its first token, as Bedrock's does
            frame = event("messageStart", {"role": "assistant"}) + frame
        await response.write(frame)
    latency_ms = round((loop.time() - arrived) * 1000)
    await response.write(
        event("contentBlockStop", {"contentBlockIndex": 0})
        + event("messageStop", {"stopReason": "end_turn"})
        + event("metadata", {"usage": _usage(body, tokens), "metrics": {"latencyMs": latency_ms}})
    )
    await response.write_eof()
    return response


async def converse(request: web.Request) -> web.Response:
    loop = asyncio.get_running_loop()
    arrived = loop.time()
    config = request.app[STANDINS].llm
    body, refusal = await _request(request)
    if body is None:
        assert refusal is not None
        return refusal
    tokens = reply_tokens()
    await asyncio.sleep(max(0.0, due_at(config, arrived, len(tokens) - 1) - loop.time()))
    message = {"role": "assistant", "content": [{"text": "".join(tokens)}]}
    answer = {
        "output": {"message": message},
        "stopReason": "end_turn",
        "usage": _usage(body, tokens),
        "metrics": {"latencyMs": round((loop.time() - arrived) * 1000)},
    }
    return web.json_response(answer, headers={"x-amzn-RequestId": str(uuid.uuid4())})
