"""IdleTimeout: asyncio.timeout()'s semantics for each wait, with one timer for many waits."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sonic_deploy.client.idle import IdleTimeout


def spy_timers(loop: asyncio.AbstractEventLoop) -> list[tuple[str, asyncio.TimerHandle]]:
    """The timers `loop` sets from now on: each one's callback name and handle."""
    timers: list[tuple[str, asyncio.TimerHandle]] = []
    call_at = loop.call_at

    def noting(when: float, callback: Any, *args: Any, **options: Any) -> asyncio.TimerHandle:
        handle = call_at(when, callback, *args, **options)
        timers.append((getattr(callback, "__name__", ""), handle))
        return handle

    loop.call_at = noting  # type: ignore[method-assign,assignment]
    return timers


def test_a_wait_past_the_bound_is_a_timeout() -> None:
    async def test() -> None:
        idle = IdleTimeout(0.05)
        with idle:
            await asyncio.sleep(5)

    with pytest.raises(TimeoutError):
        asyncio.run(test())


def test_the_bound_is_each_wait_s_not_the_whole_stream_s() -> None:
    """Six waits of 0.1 s under a 0.5 s bound: 0.6 s in all, none of them too long (0.4 s of slack each, for
    a busy machine)."""

    async def test() -> int:
        idle = IdleTimeout(0.5)
        waits = 0
        for _ in range(6):
            with idle:
                await asyncio.sleep(0.1)
            waits += 1
        idle.close()
        return waits

    assert asyncio.run(test()) == 6


def test_time_between_waits_does_not_count() -> None:
    async def test() -> None:
        idle = IdleTimeout(0.2)
        with idle:
            await asyncio.sleep(0)
        await asyncio.sleep(0.3)  # the caller's own work, past the bound
        with idle:
            await asyncio.sleep(0)
        idle.close()

    asyncio.run(test())


def test_one_timer_for_many_waits_and_none_without_a_bound() -> None:
    async def test(seconds: float | None) -> list[str]:
        timers = spy_timers(asyncio.get_running_loop())
        idle = IdleTimeout(seconds)
        for _ in range(200):
            with idle:
                await asyncio.sleep(0)
        idle.close()
        return [name for name, _ in timers]

    assert asyncio.run(test(10)) == ["_fire"]
    assert asyncio.run(test(None)) == []


def test_the_task_s_own_cancel_stays_a_cancel() -> None:
    async def test() -> None:
        idle = IdleTimeout(5)

        async def wait() -> None:
            with idle:
                await asyncio.sleep(5)

        task = asyncio.create_task(wait())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        idle.close()

    asyncio.run(test())


def test_an_expiry_leaves_the_task_uncancelled_for_what_follows() -> None:
    """After the TimeoutError is handled, the task goes on: a later await is not cancelled."""

    async def test() -> str:
        idle = IdleTimeout(0.02)
        try:
            with idle:
                await asyncio.sleep(5)
        except TimeoutError:
            pass
        await asyncio.sleep(0.01)
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0
        return "went on"

    assert asyncio.run(test()) == "went on"


def test_an_outside_cancel_with_the_expiry_stays_a_cancel() -> None:
    """Someone else cancels the task in the same loop turn as the expiry: theirs is the one that counts,
    as with asyncio.timeout(), and the task is left with their one request."""

    async def test() -> int:
        idle = IdleTimeout(0.05)
        task = asyncio.current_task()
        assert task is not None
        expire = idle._fire

        def expire_and_cancel() -> None:
            expire()
            task.cancel()

        idle._fire = expire_and_cancel  # type: ignore[method-assign]
        try:
            with idle:
                await asyncio.sleep(5)
        except asyncio.CancelledError:
            return task.cancelling()
        raise AssertionError("the outside cancel was lost")

    assert asyncio.run(test()) == 1


def test_two_waits_at_once_are_refused() -> None:
    async def test() -> None:
        idle = IdleTimeout(5)

        async def wait() -> None:
            with idle:
                await asyncio.sleep(0.05)

        await asyncio.gather(wait(), wait())

    with pytest.raises(RuntimeError, match="two waits at once"):
        asyncio.run(test())


def test_a_second_event_loop_gets_its_own_timer() -> None:
    """A timer left on the first loop (no close) would bound nothing on the second."""
    idle = IdleTimeout(0.05)

    async def wait(seconds: float) -> None:
        with idle:
            await asyncio.sleep(seconds)

    asyncio.run(wait(0))
    with pytest.raises(TimeoutError):
        asyncio.run(wait(5))


def test_zero_expires_at_once_as_asyncio_timeout_does() -> None:
    async def test() -> None:
        with IdleTimeout(0):
            await asyncio.sleep(5)

    with pytest.raises(TimeoutError):
        asyncio.run(test())
