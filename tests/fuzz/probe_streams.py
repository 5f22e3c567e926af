"""Streams of Cartesia JSON events as a server may send them, well or badly, for the probe's accounting.

`events()` draws one context's events (audio of whole or cut samples, empty chunks, bad base64, chunks
without data, timestamps and unknown types, `done`, `chunk` with `done: true`, `error` with any
`status_code`, lines that are not JSON objects); `expected_kind` says what the probe must count for them
(None: `ok`), from docs/probe.md's table alone, so that a new event shape added here is checked against
the documentation, not against the code under test. `cuts()` draws where a transport cuts the bytes
(SageMaker `PayloadPart`s may cut a line anywhere).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import strategies as st

Event = dict[str, Any] | str  # a str is sent as it is: not a JSON object

SAMPLE_BYTES = 2  # pcm_s16le, what RequestTemplate() asks for
# Sample bytes that can never spell "RIFF": a WAV header is a fault of its own, tested apart.
_audio = st.binary(max_size=40).map(lambda raw: bytes(byte & 0x3F for byte in raw))

_chunk = _audio.map(lambda pcm: {"type": "chunk", "data": base64.b64encode(pcm).decode(), "done": False})
_last_chunk = _audio.map(lambda pcm: {"type": "chunk", "data": base64.b64encode(pcm).decode(), "done": True})
_bad_chunk = st.sampled_from(["not base64!", None, 7, "AAA"]).map(
    lambda data: {"type": "chunk", "data": data}
)
_quiet = st.sampled_from(["timestamps", "phoneme_timestamps", "flush_done", "prosody", "newer_kind"]).map(
    lambda kind: {"type": kind, "done": False}
)
_done = st.just({"type": "done", "done": True, "status_code": 200})
_status = st.one_of(st.none(), st.sampled_from([True, "429", 400, 422, 429, 500, 503, 200]))
_error = _status.map(lambda status: {"type": "error", "done": True, "status_code": status, "title": "x"})
_not_an_object = st.sampled_from(['{"type": "chunk", "da', "[1, 2]", '"done"', "null", "{]"])


def events() -> st.SearchStrategy[list[Event]]:
    body = st.lists(st.one_of(_chunk, _chunk, _quiet, _bad_chunk, _not_an_object), max_size=6)
    end = st.one_of(_done, _last_chunk, _error, st.just(None))  # None: the stream stops without an end
    return st.tuples(body, end).map(lambda drawn: drawn[0] + ([] if drawn[1] is None else [drawn[1]]))


def cuts() -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(min_value=1, max_value=64), max_size=12)


def render(event: Event) -> bytes:
    return (event if isinstance(event, str) else json.dumps(event)).encode()


def _error_kind(status: object) -> str:
    if not isinstance(status, int) or isinstance(status, bool):
        return "error_event"
    if status in (429, 422):
        return f"error_event_{status}"
    return f"error_event_{status // 100}xx"


def expected_kind(stream: list[Event]) -> str | None:
    """What docs/probe.md says the probe counts: the first fault met, in order, or the end's verdict."""
    audio = 0
    for event in stream:
        if isinstance(event, str):
            return "malformed"  # "an event that is not JSON"
        kind = event["type"]
        if kind == "error":
            return _error_kind(event["status_code"])
        if kind == "chunk":
            data = event["data"]
            if not isinstance(data, str) or data in ("not base64!", "AAA"):
                return "malformed"  # "a chunk that is not base64"
            audio += len(base64.b64decode(data))
        if kind == "done" or event.get("done") is True:
            if not audio:
                return "no_audio"
            return "malformed" if audio % SAMPLE_BYTES else None  # "not whole samples"
    return "cut"  # "the stream ended ... before done"
