"""The reference server's schedule, apart from any wire format: delays count from the request's arrival."""

from __future__ import annotations

import asyncio

import pytest

from sonic_deploy.audio import AudioFormat
from sonic_deploy.event_loop import SPIN_S
from sonic_deploy.standins.reference_stream import ReferenceBehaviour, ServerConfig


def test_the_first_byte_delay_counts_from_arrival_not_from_when_the_stream_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Time spent parsing and answering the request comes out of the delay, not on top of it."""
    clock = [1000.0]  # the loop's clock, moved only by the server's sleeps: no other process's load counts
    sleeps: list[float] = []

    async def recorded(delay: float) -> None:
        sleeps.append(delay)
        clock[0] += delay

    monkeypatch.setattr(asyncio, "sleep", recorded)  # as the reference server calls it: asyncio.sleep
    behaviour = ReferenceBehaviour(ServerConfig(first_byte_ms=90, chunk_ms=20, pace=1.0, audio_ms=40))

    async def stream() -> list[str]:
        monkeypatch.setattr(asyncio.get_running_loop(), "time", lambda: clock[0])
        arrived = clock[0] - 0.060  # the request came in 60 ms ago
        return [event.kind async for event in behaviour.events("hi", AudioFormat(), "", arrived)]

    assert asyncio.run(stream()) == ["chunk", "chunk", "done"]
    # 90 ms after arrival is 30 ms away (its last SPIN_S read off the clock, not slept); the schedule goes on
    # from there, one chunk every 20 ms.
    assert sleeps == pytest.approx([0.030 - SPIN_S, 0.020 + SPIN_S])
