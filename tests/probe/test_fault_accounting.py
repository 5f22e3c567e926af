"""The probe against a server that misbehaves on purpose (tests/probe/fault_server.py): each fault lands in
its error kind (or `ok`), every request is counted once, and none hangs past its timeout.

No timed assertions: a fault that stops a request by its deadline ("slow_*", or a WebSocket fault whose
messages are all another context's, expected as `timeout`) never answers the request, so whatever
the machine's load, the request's own timeout is what ends it; the others get a long timeout that only a
hang would reach (and the kind would then be `timeout`, not the one expected).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sonic_deploy.audio import AudioFormat
from sonic_deploy.probe.metrics import StreamRecorder
from sonic_deploy.probe.requests import AgentTraffic, RequestTemplate, new_context_id
from sonic_deploy.probe.stats import LevelStats
from sonic_deploy.probe.targets import Target
from sonic_deploy.probe.targets.http import HttpBytesTarget
from sonic_deploy.probe.targets.sagemaker import SageMakerTarget
from sonic_deploy.probe.targets.sagemaker_async import AsyncSageMakerTarget
from sonic_deploy.probe.targets.ws import WebSocketTarget
from tests.probe.fault_server import CONTEXTS, FAULTS, MULTIPLEXED, fault_server

SHORT_S, LONG_S = 0.5, 20.0
ROUNDS = 2  # per fault, each of two requests at once (CONTEXTS multiplexed): the second on a socket or pool that saw the first


def _expected(route: str, client: str) -> dict[str, str | None]:
    return MULTIPLEXED if client == "multiplexed" else FAULTS[route]


def _target(route: str, base: str, fault: str, client: str) -> Target:
    timeout = SHORT_S if _expected(route, client)[fault] == "timeout" else LONG_S
    ws = base.replace("http://", "ws://")
    if route == "ws" and client == "multiplexed":
        url = f"{ws}/tts/websocket?multiplexed=1&fault={fault}"
        return WebSocketTarget(url, {}, CONTEXTS, timeout)
    if route == "ws":
        agent = AgentTraffic(interval_s=0.0) if client == "agent" else None
        return WebSocketTarget(f"{ws}/tts/websocket?fault={fault}", {}, 1, timeout, agent)
    if route == "http":
        return HttpBytesTarget(f"{base}/tts/bytes?fault={fault}", {}, timeout)
    kind = SageMakerTarget if client == "boto3" else AsyncSageMakerTarget
    return kind(fault, "us-east-1", base, timeout)


async def _one(target: Target, route: str) -> dict[str, Any]:
    recorder = StreamRecorder(audio=AudioFormat(), scheduled_at=0.0, open_loop=False)
    body = RequestTemplate().body("Hello there. How are you?", new_context_id(), route)
    await target.request(body, recorder)
    return recorder.record()


async def _fault(base: str, route: str, fault: str, client: str) -> list[dict[str, Any]]:
    target = _target(route, base, fault, client)
    at_once = CONTEXTS if client == "multiplexed" else 2
    await target.start(at_once)
    records: list[dict[str, Any]] = []
    try:
        for _ in range(ROUNDS):
            records += await asyncio.gather(*(_one(target, route) for _ in range(at_once)))
    finally:
        await target.stop()
    return records


async def _run(route: str, client: str) -> dict[str, list[dict[str, Any]]]:
    faults = _expected(route, client)
    async with fault_server() as base:
        results = await asyncio.gather(*(_fault(base, route, fault, client) for fault in faults))
    return dict(zip(faults, results, strict=True))


# Messages for another context a request meets on its dedicated socket, dropped and counted on the request.
FOREIGN = {"foreign_then_own": 1}

# "agent": a call's turns, each in pieces, on one pooled socket reused turn after turn.
CASES = [("ws", "dedicated"), ("ws", "agent"), ("ws", "multiplexed"), ("http", "aiohttp")]
CASES += [("sagemaker", "async"), ("sagemaker", "boto3")]


@pytest.mark.parametrize(("route", "client"), CASES)
def test_each_fault_lands_in_its_error_kind_and_every_request_is_counted_once(
    route: str, client: str
) -> None:
    expected = _expected(route, client)
    results = asyncio.run(asyncio.wait_for(_run(route, client), timeout=120))
    wrong: list[str] = []
    total = LevelStats()
    for fault, records in results.items():
        stats = LevelStats()
        for record in records:
            stats.add(record)
            total.add(record)
            if record["error"] != expected[fault] or record["ok"] is (expected[fault] is not None):
                wrong.append(f"{fault}: {record['error']} ({record['detail']})")
            foreign = FOREIGN.get(fault, 0) if route == "ws" and client != "multiplexed" else 0
            # (by a deadline, how many had arrived first depends on the machine's load)
            if expected[fault] != "timeout" and record["foreign_messages"] != foreign:
                wrong.append(f"{fault}: {record['foreign_messages']} foreign messages, not {foreign}")
        assert stats.ok + sum(stats.errors.values()) == stats.requests == len(records)
    assert total.ok + sum(total.errors.values()) == total.requests
    requests = total.requests
    assert not wrong, f"{len(wrong)} of {requests} requests misclassified:\n" + "\n".join(wrong)
