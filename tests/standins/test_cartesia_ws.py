"""The stand-in's contexts on one socket, driven directly: every admission is released exactly once."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import pytest
from aiohttp import web

from sonic_deploy.standins.cartesia_ws import _Socket
from sonic_deploy.standins.reference_stream import ReferenceBehaviour, ServerConfig

REQUEST = {
    "model_id": "sonic-3",
    "voice": "a-voice",
    "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 16000},
    "context_id": "ctx",
    "transcript": "Hello there.",
    "continue": True,
}


class _Sent:
    """Stands for aiohttp's WebSocketResponse: keeps what the server sends."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def send_str(self, text: str) -> None:
        self.messages.append(json.loads(text))


async def _drive(*messages: dict[str, Any], close: bool = False) -> tuple[ReferenceBehaviour, _Sent]:
    behaviour = ReferenceBehaviour(ServerConfig(first_byte_ms=1, chunk_ms=20, pace=0, audio_ms=40))
    sent = _Sent()
    session = _Socket(cast(web.Request, None), cast(web.WebSocketResponse, sent), behaviour)
    # As aiohttp hands over frames read in one buffer: one after the other, the loop never run between.
    for message in messages:
        await session.receive(json.dumps(message), asyncio.get_running_loop().time())
    if close:
        session.close()
    for _ in range(100):
        if not session.contexts:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0)  # the contexts' done-callbacks
    return behaviour, sent


@pytest.mark.parametrize(
    ("follow", "close"),
    [
        ({"context_id": "ctx", "cancel": True}, False),  # a barge-in read with the request
        (None, True),  # the socket closed with the request still unread by its context
    ],
)
def test_a_context_stopped_before_its_task_ran_still_gives_its_place_back(
    follow: dict[str, Any] | None, close: bool
) -> None:
    messages = [REQUEST] if follow is None else [REQUEST, follow]
    behaviour, sent = asyncio.run(_drive(*messages, close=close))
    assert behaviour.active == 0
    assert (behaviour.counts["admitted"], behaviour.counts["interrupted"]) == (1, 1)
    assert sent.messages == []  # nothing was spoken, and nothing follows a cancel


def test_a_continued_context_is_one_stream_with_one_done() -> None:
    behaviour, sent = asyncio.run(_drive(REQUEST, {**REQUEST, "transcript": "Bye.", "continue": False}))
    assert [m["type"] for m in sent.messages] == ["chunk"] * 4 + ["done"]
    assert (behaviour.active, behaviour.counts["admitted"], behaviour.counts["completed"]) == (0, 1, 1)


def test_a_cancel_without_a_context_id_is_refused_with_the_field_named() -> None:
    _, sent = asyncio.run(_drive({"cancel": True}))
    assert [(m["type"], m["status_code"], "context_id" in m) for m in sent.messages] == [
        ("error", 422, False)
    ]
    assert sent.messages[0]["message"].startswith("context_id")
