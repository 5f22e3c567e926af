"""What the pipecat tests share: quiet logs, a processor that records the frames passing one way, and a
worker run by a script."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Iterator

import pytest
from loguru import logger
from pipecat.frames.frames import EndFrame, Frame
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.workers.runner import WorkerRunner

from tests.standins.real_clients import TIMEOUT_S


@pytest.fixture
def quiet_pipecat() -> Iterator[None]:
    """pipecat logs every frame it handles at DEBUG through loguru: warnings are enough in a test. A test
    module asks for it with `pytestmark = pytest.mark.usefixtures("quiet_pipecat")` (this module is a
    plugin of tests/conftest.py)."""
    logger.remove()
    handler = logger.add(sys.stderr, level="WARNING")
    yield
    logger.remove(handler)
    logger.add(sys.stderr)


class FrameRecorder(FrameProcessor):
    """Passes every frame on and records those going one way (StartFrame and the like included)."""

    def __init__(self, direction: FrameDirection) -> None:
        super().__init__()
        self.direction = direction
        self.frames: list[Frame] = []
        self.arrived = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if direction == self.direction:
            self.frames.append(frame)
            self.arrived.set()
        await self.push_frame(frame, direction)

    def of(self, kind: type[Frame]) -> list[Frame]:
        return [frame for frame in self.frames if isinstance(frame, kind)]

    def count(self, kind: type[Frame]) -> int:
        return len(self.of(kind))

    async def wait_until(self, ready: Callable[[], bool]) -> None:
        """Until `ready()` holds, checked as each recorded frame arrives."""

        async def wait() -> None:
            while not ready():
                self.arrived.clear()
                await self.arrived.wait()

        await asyncio.wait_for(wait(), TIMEOUT_S)

    async def wait_for(self, kind: type[Frame]) -> Frame:
        """The first frame of `kind`, once it has arrived."""
        await self.wait_until(lambda: bool(self.of(kind)))
        return self.of(kind)[0]


async def run_worker(
    worker: PipelineWorker, script: Callable[[], Awaitable[None]], *, cancel: bool = False
) -> None:
    """Runs `worker` on a runner, `script()` once its pipeline has started, then an EndFrame (which waits for
    what is still on its way), or with `cancel` a cancellation; a script that fails cancels the worker."""
    started = asyncio.Event()

    async def _started(worker: PipelineWorker, frame: Frame) -> None:
        started.set()

    worker.add_event_handler("on_pipeline_started", _started)

    async def drive() -> None:
        try:
            await asyncio.wait_for(started.wait(), TIMEOUT_S)
            await script()
        except BaseException:
            await worker.cancel()
            raise
        if cancel:
            await worker.cancel()
        else:
            await worker.queue_frame(EndFrame())

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    await asyncio.wait_for(asyncio.gather(runner.run(), drive()), 2 * TIMEOUT_S)
