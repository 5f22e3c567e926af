"""What the stand-in's Cartesia and SageMaker routes share: its behaviour on the app, the API's error shape,
the counters of `GET /stats` and the API key check."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from sonic_deploy.client import cartesia_api
from sonic_deploy.standins.reference_stream import ReferenceBehaviour

if TYPE_CHECKING:
    from sonic_deploy.standins.llm import LlmConfig
    from sonic_deploy.standins.stt import SttConfig


@dataclass
class Standins:
    """What the server was told to do, replaced whole by `POST /control` (`probe serve --control`). A
    request reads it once, as it starts: a stream already running goes on as it was told."""

    behaviour: ReferenceBehaviour
    llm: LlmConfig
    stt: SttConfig


STANDINS = web.AppKey("standins", Standins)
STATUS_FAULTS = {"status500": 500, "status422": 422}
# Title and machine-readable code per status. The codes are the stand-in's own: Cartesia documents the
# fields (cartesia_api.error_message), not a list of values.
_ERRORS = {
    400: ("Bad request", "bad_request"),
    401: ("Unauthorized", "unauthorized"),
    422: ("Invalid request", "invalid_request"),
    429: ("Too many requests", "concurrency_limited"),
    500: ("Internal server error", "internal_error"),
}
_MAX_VALUES = 16


def abort(request: web.Request) -> None:
    """A connection reset mid-stream, as a crashed or restarted server would cause."""
    if request.transport is not None:
        request.transport.abort()


def error_body(status: int, message: str, context_id: str | None, request_id: str) -> dict[str, Any]:
    title, code = _ERRORS.get(status, _ERRORS[500])
    return cartesia_api.error_message(status, title, message, code, context_id, request_id)


def http_error(status: int, message: str) -> web.Response:
    body = error_body(status, message, None, uuid.uuid4().hex)
    del body["type"], body["done"]
    return web.json_response(body, status=status)


def count_value(behaviour: ReferenceBehaviour, kind: str, value: object) -> None:
    """Count `kind:value` in /stats (an API version, a model id); the counters stay few whatever clients
    send: past the first few values, or for a long one, `kind:other`."""
    text = value if isinstance(value, str) and value else "none"
    seen = sum(1 for name in behaviour.counts if name.startswith(f"{kind}:"))
    if f"{kind}:{text}" not in behaviour.counts and (seen >= _MAX_VALUES or len(text) > 32):
        text = "other"
    behaviour.counts[f"{kind}:{text}"] += 1


def refused(request: web.Request, behaviour: ReferenceBehaviour) -> web.Response | None:
    """Count the API version and credential form; a 401 if the server wants a key and got another."""
    version = request.headers.get("Cartesia-Version") or request.query.get("cartesia_version")
    count_value(behaviour, "version", version)
    bearer = request.headers.get("Authorization", "")
    given = {
        "x-api-key": request.headers.get("X-API-Key"),
        "bearer": bearer[7:].strip() if bearer[:7].lower() == "bearer " else None,
        "query": request.query.get("api_key"),
    }
    form = next((name for name, value in given.items() if value), "none")
    behaviour.counts[f"auth:{form}"] += 1
    key = behaviour.config.api_key
    if key is None or key in given.values():
        return None
    return http_error(401, "a valid API key is required (X-API-Key, Authorization: Bearer or api_key)")
