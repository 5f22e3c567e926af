"""Any OpenAI-compatible streaming chat endpoint (OpenAI, vLLM, Ollama, LiteLLM, a gateway, `probe serve`).

    model = OpenAIChatClient("http://127.0.0.1:8000/v1", model="gpt-4o-mini", api_key=KEY)
    async for token in model.stream([Message("user", "A table for two, please.")], system=PROMPT):
        speak(token.text)

`POST {base_url}/chat/completions` with `stream: true`, read as server-sent events (`data: {chunk}` lines,
`data: [DONE]` at the end), on the client core's stamped aiohttp pool: each token's `at` is when its bytes
came off the socket. An error response is typed from its status (429 throttled, 401/403 access, 400/422
invalid, 5xx retryable) with the message of OpenAI's error shape (`{"error": {"message": ...}}`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import aiohttp
import orjson

from sonic_deploy.client import cartesia_api
from sonic_deploy.client.errors import InvalidRequestError, SonicError, error_for
from sonic_deploy.client.http import READ_ERRORS, PooledClient, Trace, error_body, read_error, stamped_body
from sonic_deploy.client.turn_hops import Message, Token


class OpenAIChatClient(PooledClient):
    """`base_url` is the API's root with its version (`https://api.openai.com/v1`); `api_key` goes as a bearer
    token (none for a local server). `read_timeout_s` bounds the wait for each next bytes of a reply."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        max_connections: int = 64,
        connect_timeout_s: float = 10.0,
        read_timeout_s: float = 30.0,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url {base_url!r} is not an http(s):// URL. Fix: e.g. https://api.openai.com/v1"
            )
        if not model:
            raise ValueError("model is empty. Fix: the model name the endpoint serves")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._options: dict[str, Any] = {}
        if max_tokens:  # None or 0: none sent (reasoning models refuse max_tokens)
            self._options["max_tokens"] = max_tokens
        if temperature is not None:
            self._options["temperature"] = temperature
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout_s, sock_read=read_timeout_s)
        super().__init__(max_connections, timeout)

    def body(self, messages: Sequence[Message], system: str | None) -> dict[str, Any]:
        turns = [{"role": "system", "content": system}] if system else []
        turns += [{"role": message.role, "content": message.content} for message in messages]
        return {"model": self.model, "messages": turns, "stream": True, **self._options}

    async def stream(
        self, messages: Sequence[Message], *, system: str | None = None, trace: Trace | None = None
    ) -> AsyncIterator[Token]:
        if not messages:
            raise ValueError("messages is empty: there is nothing to answer")
        payload = orjson.dumps(self.body(messages, system))
        response = await self._post(self.url, payload, self._headers, self.url, trace)
        finished = False
        try:
            if response.status != 200:
                raise _error_response(response.status, await error_body(response))
            pending = b""
            async for at, data in stamped_body(response):
                pending += data
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    text, finished = _event(line.rstrip(b"\r"))
                    if text:
                        yield Token(at, text)
                    if finished:
                        return
            raise error_for("cut", "the reply ended without data: [DONE]")
        except READ_ERRORS as error:
            raise read_error(error) from error
        finally:
            if finished:  # the chunked body's end may follow [DONE] a moment later: drained, then reused
                self._recycle(response)
            else:
                response.close()


def _event(line: bytes) -> tuple[str, bool]:
    """The text a server-sent-event line carries, and whether it ends the reply."""
    if not line.startswith(b"data:"):
        return "", False  # a blank separator, a comment (`: keep-alive`), an `event:` or `id:` field
    data = line[5:].strip()
    if data == b"[DONE]":
        return "", True
    try:
        chunk = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise error_for("malformed", f"a stream chunk is not JSON: {data[:80]!r}") from error
    if isinstance(chunk, dict) and isinstance(chunk.get("error"), dict):  # an error in the stream
        raise error_for("stream_error", str(chunk["error"].get("message") or chunk["error"]))
    choices = chunk.get("choices") if isinstance(chunk, dict) else None
    if not choices:
        return "", False  # the usage chunk
    choice = choices[0] if isinstance(choices, list) else None
    delta = choice.get("delta") if isinstance(choice, dict) else None
    if not isinstance(delta, dict):
        raise error_for("malformed", f"a stream chunk has no choices[0].delta object: {data[:80]!r}")
    content = delta.get("content")
    return (content if isinstance(content, str) else ""), False


def _error_response(status: int, raw: bytes) -> SonicError:
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        message = str(orjson.loads(raw)["error"]["message"])
        return _typed(status, message)
    return _typed(status, raw[:200].decode(errors="replace"))


def _typed(status: int, message: str) -> SonicError:
    if status in (401, 403):
        return error_for("credentials", f"HTTP {status}: {message}. Fix: the endpoint's API key", status)
    if status == 400:  # what OpenAI-compatible servers answer a bad request with
        return InvalidRequestError("status_400", message, status)
    return error_for(cartesia_api.status_kind("status", status), message, status)
