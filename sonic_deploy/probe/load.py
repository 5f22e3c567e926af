"""Load shapes: a closed-loop sweep of concurrency levels, or an open loop of scheduled arrivals.

Open loop: every request has a scheduled start, and its latency counts from then, so a slow server (or an
overloaded client) cannot hide queueing by delaying the next request (coordinated omission).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sonic_deploy.client.trust import ca_context
from sonic_deploy.event_loop import steady_collector
from sonic_deploy.probe.level import Level
from sonic_deploy.probe.metrics import StreamRecorder
from sonic_deploy.probe.requests import (
    DEFAULT_CARTESIA_VERSION,
    AgentTraffic,
    RequestTemplate,
    new_context_id,
)
from sonic_deploy.probe.stats import LevelStats
from sonic_deploy.probe.targets import Target
from sonic_deploy.probe.wires import WIRES
from sonic_deploy.routes import Wire

Emit = Callable[[dict[str, Any]], None]
# The automatic ramp-up follows one request's duration, up to this.
MAX_AUTO_RAMP_UP_S = 10.0


@dataclass(frozen=True)
class TargetSpec:
    """Where to send requests; picklable, so that worker processes build their own clients."""

    route: str
    url: str | None = None
    endpoint: str | None = None
    region: str | None = None
    endpoint_url: str | None = None
    api_key: str = "probe"
    cartesia_version: str = DEFAULT_CARTESIA_VERSION
    multiplex: int = 1
    # The WebSocket route only: an agent's turns (pieces with `continue`, one long-lived socket per call).
    agent: AgentTraffic | None = None
    timeout_s: float = 30.0
    # SageMaker: "async" (boto3's request and error parsing; aiohttp's I/O) or "boto3" (its own threads).
    client: str = "async"
    # The WebSocket and HTTP routes over TLS: a PEM file of the CA that signed the API's certificate (a path,
    # not a context: each worker process loads it).
    ca_bundle: str | None = None

    def build(self) -> Target:
        headers = {"X-API-Key": self.api_key, "Cartesia-Version": self.cartesia_version}
        trust = None if self.ca_bundle is None else ca_context(self.ca_bundle)
        if self.route == "ws":
            from sonic_deploy.probe.targets.ws import WebSocketTarget

            return WebSocketTarget(str(self.url), headers, self.multiplex, self.timeout_s, self.agent, trust)
        if self.route == "http":
            from sonic_deploy.probe.targets.http import HttpBytesTarget

            return HttpBytesTarget(str(self.url), headers, self.timeout_s, trust)
        if self.client == "boto3":
            from sonic_deploy.probe.targets.sagemaker import SageMakerTarget

            return SageMakerTarget(str(self.endpoint), self.region, self.endpoint_url, self.timeout_s)
        from sonic_deploy.probe.targets.sagemaker_async import AsyncSageMakerTarget

        return AsyncSageMakerTarget(str(self.endpoint), self.region, self.endpoint_url, self.timeout_s)

    def describe(self) -> dict[str, Any]:
        where = (
            {"url": self.url, "ca_bundle": self.ca_bundle}
            if self.route in ("ws", "http")
            else {
                "endpoint": self.endpoint,
                "region": self.region,
                "endpoint_url": self.endpoint_url,
                "client": self.client,
            }
        )
        workload = self.agent.describe() if self.agent is not None else {"workload": "whole"}
        return {
            "route": self.route,
            **where,
            "multiplex": self.multiplex,
            "timeout_s": self.timeout_s,
            "cartesia_version": self.cartesia_version if WIRES[self.route] is Wire.CARTESIA else None,
            **workload,
        }


@dataclass(frozen=True)
class ProbeSettings:
    target: TargetSpec
    template: RequestTemplate
    threshold_db: float | None = -40.0
    playback_delay_ms: float = 0.0
    max_in_flight: int = 1024
    seed: int = 1
    # Closed loop: slot starts are spread over this many seconds, so that streams are not in lock-step;
    # None: over the duration of one warm-up request, run alone first (see `_LevelRun.closed`).
    ramp_up_s: float | None = None
    # Closed loop: a slot whose request failed waits this long before its next one.
    error_backoff_s: float = 0.1


class _LevelRun:
    def __init__(
        self,
        settings: ProbeSettings,
        whole: Level,
        worker: int,
        workers: int,
        emit: Emit,
        stopped: Callable[[], bool] | None = None,
    ) -> None:
        self.settings, self.whole, self.emit = settings, whole, emit
        # An in-VPC task's stop (the runner put stop.json): no request begins once it is true.
        self.stopped = stopped or (lambda: False)
        self.worker, self.workers = worker, workers
        self.level = whole.share(worker, workers)
        self.stats = LevelStats()
        self.target = settings.target.build()
        self.transcripts = settings.template.cycle()
        self.sequence = itertools.count()

    async def one(self, scheduled_at: float, warmup: bool) -> bool:
        """One request, recorded and emitted; True if it succeeded."""
        recorder = StreamRecorder(
            audio=self.settings.template.audio,
            scheduled_at=scheduled_at,
            open_loop=self.level.rate is not None and not warmup,
            threshold_db=self.settings.threshold_db,
            playback_delay_ms=self.settings.playback_delay_ms,
        )
        context_id = new_context_id()
        body = self.settings.template.body(next(self.transcripts), context_id, self.target.route)
        try:
            await self.target.request(body, recorder)
        except Exception as error:  # an error never aborts the run: it is counted, and the run goes on
            recorder.fail("unexpected", repr(error))
        record = {
            "level": self.level.index,
            "concurrency": self.whole.concurrency,
            "rate": self.whole.rate,
            "worker": self.worker,
            "seq": next(self.sequence),
            "warmup": warmup,
            "context_id": context_id,
            "time": round(time.time(), 6),
            **recorder.record(),
        }
        if not warmup:
            self.stats.add(record)
        self.emit(record)
        return recorder.ok

    async def closed(self, warmups: int, count: int, concurrency: int) -> None:
        """Slots take requests from one queue: warm-ups first, then measured ones, with no barrier between,
        so that the spread of the ramp-up carries over into the measured requests.

        With the automatic ramp-up, one warm-up request runs alone first (in each worker process) and the
        slots then start spread over its duration: with a warm-up per slot (the default), the level is in
        its steady state from its first measured request. Started all at once (`--ramp-up 0`), slots stay
        in lock-step, every handshake and first chunk of the level landing in the same millisecond, which
        no caller traffic looks like.
        """
        issued = itertools.count()
        slots = max(1, min(concurrency, warmups + count))
        ramp_up = self.settings.ramp_up_s
        if ramp_up is None:
            ramp_up = await self._pilot(issued, warmups) if slots > 1 else 0.0
        if count:  # a measured level, not an open loop's warm-up
            self.stats.ramp_up_s = ramp_up

        async def slot(index: int) -> None:
            await asyncio.sleep(ramp_up * (index + self.worker / self.workers) / slots)
            while not self.stopped() and (number := next(issued)) < warmups + count:
                if not await self.one(time.perf_counter(), warmup=number < warmups):
                    # As a caller would: retrying a 429 at once would turn the slot into a flood.
                    await asyncio.sleep(self.settings.error_backoff_s)

        await asyncio.gather(*(slot(i) for i in range(slots)))

    async def _pilot(self, issued: Iterator[int], warmups: int) -> float:
        """The automatic ramp-up: the duration of a warm-up request run alone. A failed one says nothing
        about it (a 429 or a refusal is quick, a timeout slow): the next warm-up is tried, after the usual
        back-off, while warm-ups last. None succeeded, or none to run: 0 (all at once)."""
        for _ in range(warmups):
            began = time.perf_counter()
            next(issued)
            if await self.one(began, warmup=True):
                return min(MAX_AUTO_RAMP_UP_S, time.perf_counter() - began)
            await asyncio.sleep(self.settings.error_backoff_s)
        return 0.0

    async def open(self, rate: float, duration_s: float) -> None:
        chance = random.Random(self.settings.seed * 1000 + self.worker)
        gate = asyncio.Semaphore(self.settings.max_in_flight)
        tasks: set[asyncio.Task[None]] = set()

        async def scheduled(at: float) -> None:
            async with gate:
                await self.one(at, warmup=False)

        start = time.perf_counter()
        poisson = self.level.arrivals == "poisson"
        # Poisson arrivals split into independent Poisson streams; constant ones interleave across workers.
        at = start + (chance.expovariate(rate) if poisson else self.worker / self.workers / rate)
        while at < start + duration_s and not self.stopped():
            await asyncio.sleep(max(0.0, at - time.perf_counter()))
            if self.stopped():
                break
            task = asyncio.create_task(scheduled(at))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            at += chance.expovariate(rate) if poisson else 1 / rate
        if tasks:
            await asyncio.gather(*tasks)

    async def run(self) -> LevelStats:
        level = self.level
        await self.target.start(self.settings.max_in_flight if level.rate else max(1, level.concurrency or 1))
        try:
            # After the target is built and started: what they made is frozen out of collections too.
            with steady_collector() as pauses:
                if level.rate is not None:
                    if level.warmup:
                        await self.closed(level.warmup, 0, min(level.warmup, 8))
                    await self.open(level.rate, level.duration_s)
                elif level.concurrency:
                    await self.closed(level.warmup, level.requests, level.concurrency)
            self.stats.gc_collections = pauses.collections
            self.stats.gc_total_ms, self.stats.gc_max_ms = pauses.total_ms, pauses.max_ms
        finally:
            await self.target.stop()
        return self.stats


async def run_level(
    settings: ProbeSettings,
    whole: Level,
    worker: int,
    workers: int,
    emit: Emit,
    start_at: float | None = None,
    stopped: Callable[[], bool] | None = None,
) -> LevelStats:
    """Run this worker's share of `whole` from `start_at` (perf_counter), so that workers start together;
    `stopped`: no request begins once it returns True (an in-VPC task told to stop)."""
    if start_at is not None:
        while (wait := start_at - time.perf_counter()) > 0 and not (stopped and stopped()):
            await asyncio.sleep(min(wait, 0.5))
    return await _LevelRun(settings, whole, worker, workers, emit, stopped).run()
