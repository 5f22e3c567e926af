"""The reference server's schedule, apart from any wire format: delays count from the request's arrival."""

from __future__ import annotations

import asyncio

import pytest

from sonic_deploy.probe.reference_stream import ReferenceBehaviour, ServerConfig
from sonic_deploy.probe.requests import AudioFormat


def test_the_first_byte_delay_counts_from_arrival_not_from_when_the_stream_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Time spent parsing and answering the request comes out of the delay, not on top of it."""
    sleeps: list[float] = []

    async def recorded(delay: float) -> None:
        sleeps.append(delay)

    monkeypatch.setattr(asyncio, "sleep", recorded)  # as the reference server calls it: asyncio.sleep
    behaviour = ReferenceBehaviour(ServerConfig(first_byte_ms=90, chunk_ms=20, pace=1.0, audio_ms=40))

    async def stream() -> list[str]:
        arrived = asyncio.get_running_loop().time() - 0.060  # the request came in 60 ms ago
        return [event.kind async for event in behaviour.events("hi", AudioFormat(), "", arrived)]

    assert asyncio.run(stream()) == ["chunk", "chunk", "done"]
    assert 0 < sleeps[0] <= 0.030  # 90 ms after arrival is at most 30 ms away
    assert sleeps[1] == pytest.approx(sleeps[0] + 0.020, abs=0.005)  # the schedule goes on from there
