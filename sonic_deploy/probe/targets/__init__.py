"""The three routes the probe measures, behind one small interface."""

from __future__ import annotations

from typing import Any, Protocol

from sonic_deploy.probe.metrics import StreamRecorder


class Target(Protocol):
    """One route. `request` never raises: every failure is recorded on the recorder as an error kind."""

    route: str

    async def start(self, max_in_flight: int) -> None: ...

    async def request(self, body: dict[str, Any], recorder: StreamRecorder) -> None: ...

    async def stop(self) -> None: ...
