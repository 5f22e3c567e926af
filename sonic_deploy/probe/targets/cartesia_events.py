"""The JSON events shared by the WebSocket API and the SageMaker stream, and how errors are named."""

from __future__ import annotations

import json
from typing import Any

import orjson

from sonic_deploy.probe.metrics import MalformedEventError, StreamRecorder

_IGNORED = frozenset({"timestamps", "phoneme_timestamps", "flush_done"})


def status_kind(prefix: str, status: object) -> str:
    """`status_429`, `status_422`, `status_5xx`, `status_4xx`... so that runs compare by kind."""
    if not isinstance(status, int):
        return prefix
    if status in (429, 422):
        return f"{prefix}_{status}"
    return f"{prefix}_{status // 100}xx"


def decode_event(text: str | bytes) -> dict[str, Any]:
    """One JSON event. orjson parses a well-formed event at about a quarter of the standard library's CPU;
    what it refuses (NaN or Infinity, which Python's `json.dumps` writes; lone surrogates; a byte-order
    mark) goes to the standard library, so that an event counts as malformed only if `json.loads` refuses
    it too."""
    try:
        event = orjson.loads(text)
    except orjson.JSONDecodeError:
        try:
            event = json.loads(text)
        except (ValueError, RecursionError) as error:
            raise MalformedEventError(f"not JSON: {str(text)[:80]!r}") from error
    if not isinstance(event, dict):
        raise MalformedEventError("event is not a JSON object")
    return event


def apply_event(event: dict[str, Any], at: float, recorder: StreamRecorder) -> bool:
    """Account for one event received at `at`; True when the stream is finished (done or error)."""
    kind = event.get("type")
    if kind == "chunk":
        recorder.audio_b64(event.get("data"), at)
        finished = event.get("done") is True
    elif kind == "done":
        finished = True
    elif kind == "error":
        recorder.fail(status_kind("error_event", event.get("status_code")), str(event.get("error", "")))
        return True
    elif kind in _IGNORED:
        finished = False
    else:
        raise MalformedEventError(f"unknown event type {kind!r}")
    if finished:
        recorder.done()
    return finished
