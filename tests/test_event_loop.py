"""How the probe's code runs: the cycle collector while a level runs (set-up frozen out, young collections
rare, nothing leaked), and the reference server's selector (timeouts not rounded up to milliseconds)."""

from __future__ import annotations

import asyncio
import gc
import select
import socket
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from sonic_deploy.cli import main
from sonic_deploy.event_loop import PreciseEpollSelector, steady_collector
from sonic_deploy.standins import server


@pytest.fixture
def nothing_frozen() -> Iterator[None]:
    """A test that starts with nothing frozen; the session's freeze (tests/conftest.py) is put back after."""
    gc.unfreeze()
    yield
    gc.collect()
    gc.freeze()


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cycle collector frees it


@pytest.mark.usefixtures("nothing_frozen")
def test_the_collector_is_restored_and_unfrozen_afterwards() -> None:
    before = gc.get_threshold()
    with steady_collector(young_threshold=50_000):
        assert gc.get_threshold()[0] == 50_000
        assert gc.get_threshold()[1:] == before[1:]
        assert gc.get_freeze_count() > 0  # what existed on entry is out of every collection
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_cycles_made_while_measuring_are_still_collected_once_enough_pile_up() -> None:
    with steady_collector(young_threshold=10_000):
        first = _Node()
        watch = weakref.ref(first)
        del first
        for _ in range(1_000):
            _Node()
        assert watch() is not None  # Python's default would have collected after 700 new objects...
        for _ in range(30_000):
            _Node()
        assert watch() is None  # ...this still does, once a growing heap reaches the threshold


@pytest.mark.usefixtures("nothing_frozen")
def test_the_collector_is_restored_when_the_level_fails() -> None:
    before = gc.get_threshold()
    try:
        with steady_collector(young_threshold=50_000):
            raise RuntimeError("a level that fails")
    except RuntimeError:
        pass
    assert (gc.get_threshold(), gc.get_freeze_count()) == (before, 0)


@pytest.mark.usefixtures("nothing_frozen")
def test_objects_frozen_before_entry_stay_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with steady_collector():
            pass
        assert gc.get_freeze_count() >= frozen > 0
    finally:
        gc.unfreeze()


def test_a_collection_while_measuring_is_counted_with_its_pause() -> None:
    with steady_collector(young_threshold=1_000) as pauses:
        for _ in range(5_000):
            _Node()
    assert pauses.collections >= 1
    assert 0 < pauses.max_ms <= pauses.total_ms


needs_epoll = pytest.mark.skipif(not hasattr(select, "epoll"), reason="epoll is Linux's")


@needs_epoll
def test_the_precise_selector_waits_for_the_exact_timeout_then_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float | None] = []
    real_select = select.select

    def recording(read: Any, write: Any, error: Any, timeout: float | None = None) -> Any:
        waits.append(timeout)
        return real_select(read, write, error, timeout)

    monkeypatch.setattr(select, "select", recording)
    left, right = socket.socketpair()
    with PreciseEpollSelector() as selector, left, right:
        selector.register(left, 1, "left")  # EVENT_READ
        assert selector.select(0.0003) == []  # 0.3 ms: epoll alone would wait a whole millisecond
        right.send(b"x")
        assert [key.data for key, _ in selector.select(0.0003)] == ["left"]
        assert [key.data for key, _ in selector.select(None)] == ["left"]  # no timeout: plain epoll
        assert [key.data for key, _ in selector.select(0)] == ["left"]  # none left: a poll
        assert [key.data for key, _ in selector.select(-1.0)] == ["left"]
    assert waits == [0.0003, 0.0003]


@needs_epoll
def test_the_reference_server_runs_on_the_precise_selector(monkeypatch: pytest.MonkeyPatch) -> None:
    selectors_used: list[object] = []

    async def serve(config: object, control: object) -> None:
        selectors_used.append(asyncio.get_running_loop()._selector)  # type: ignore[attr-defined]
        await asyncio.sleep(0.0013)  # a timer on it fires

    monkeypatch.setattr(server, "serve", serve)
    assert main(["probe", "serve", "--port", "0"]) == 0
    assert [type(selector) for selector in selectors_used] == [PreciseEpollSelector]
