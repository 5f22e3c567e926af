"""What the Cartesia TTS API accepts and answers, as the official SDK's generated types describe it.

Source: the `cartesia` Python SDK 4.2.0 (PyPI), which Cartesia generates from its OpenAPI spec:
`cartesia/_client.py` (the `cartesia-version` header it sends, 2026-08-14),
`types/raw_output_format_param.py` (containers, sample rates), `types/raw_encoding.py`,
`types/voice_specifier_param.py` (a voice is an id string or `{"id": ...}`),
`types/generation_request_param.py` (`continue`, `flush`, `max_buffer_delay_ms` 0-5000, default 3000),
`types/websocket_response.py` and `types/tts_sse_event.py` (chunk, timestamps, flush_done, done, error).
Older API versions spelled a voice `{"mode": "id", "id": ...}` and an error as one `error` string: both are
still read here. New versions may add message types: a client ignores the ones it does not know.
"""

from __future__ import annotations

import json
from typing import Any

CURRENT_API_VERSION = "2026-08-14"
SAMPLE_RATES = (8000, 16000, 22050, 24000, 44100, 48000)
ENCODINGS = ("pcm_s16le", "pcm_f32le", "pcm_mulaw", "pcm_alaw")
CONTAINERS = ("raw", "wav", "mp3")
MAX_BUFFER_DELAY_MS = 5000
DEFAULT_BUFFER_DELAY_MS = 3000
# The status codes the API puts on its messages: 206 on each piece of a stream, 200 on its end.
PARTIAL, COMPLETE = 206, 200
# A WebSocket close code that means "try again later" (RFC 6455 section 7.4.1 and the IANA registry).
CLOSE_TRY_AGAIN_LATER = 1013


class ApiRequestError(ValueError):
    """A request the API refuses (422), with the field at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def voice_id(voice: object) -> str:
    """The voice id from any form the API has accepted: "id", {"id": ...}, {"mode": "id", "id": ...}."""
    if isinstance(voice, str) and voice:
        return voice
    if isinstance(voice, dict):
        found = voice.get("id")
        if isinstance(found, str) and found and voice.get("mode", "id") == "id":
            return found
    raise ApiRequestError("voice", 'expected a voice id string or {"id": "..."}')


def check_output_format(output: object, containers: tuple[str, ...] = ("raw",)) -> tuple[str, str, int]:
    """(container, encoding, sample_rate) of an `output_format`, or ApiRequestError naming the field."""
    if not isinstance(output, dict):
        raise ApiRequestError("output_format", "expected an object")
    container = output.get("container", "raw")
    if container not in containers:
        raise ApiRequestError(
            "output_format.container", f"{container!r} is not one of {', '.join(containers)}"
        )
    encoding = output.get("encoding")
    if encoding not in ENCODINGS:
        raise ApiRequestError("output_format.encoding", f"{encoding!r} is not one of {', '.join(ENCODINGS)}")
    rate = output.get("sample_rate")
    if isinstance(rate, bool) or rate not in SAMPLE_RATES:
        raise ApiRequestError(
            "output_format.sample_rate", f"{rate!r} is not one of {', '.join(map(str, SAMPLE_RATES))}"
        )
    return str(container), str(encoding), int(rate)


def status_kind(prefix: str, status: object) -> str:
    """`status_429`, `status_422`, `status_5xx`, `status_4xx`... so that runs compare by kind."""
    if not isinstance(status, int) or isinstance(status, bool):  # JSON's true is no status code
        return prefix
    if status in (429, 422):
        return f"{prefix}_{status}"
    return f"{prefix}_{status // 100}xx"


def error_text(event: dict[str, Any]) -> str:
    """What an error message says, in the current shape (title, message, error_code) or the old one."""
    parts = [str(event[key]) for key in ("error_code", "title", "message") if event.get(key)]
    if not parts and event.get("error"):
        parts.append(str(event["error"]))
    return ": ".join(parts)


def error_message(
    status: int, title: str, message: str, error_code: str, context_id: str | None, request_id: str
) -> dict[str, Any]:
    """An `error` message in the current shape (on the WebSocket and over SSE). `done` is false: the SDK
    types call it "whether generation is complete", and LiveKit's plugin reads `done: true` as the normal
    end of a stream before it looks at the type, so an error that said so would never reach it."""
    body: dict[str, Any] = {
        "type": "error",
        "done": False,
        "status_code": status,
        "title": title,
        "message": message,
        "error_code": error_code,
        "request_id": request_id,
    }
    if context_id is not None:
        body["context_id"] = context_id
    return body


def done_message(context_id: str) -> str:
    return json.dumps({"type": "done", "done": True, "status_code": COMPLETE, "context_id": context_id})
