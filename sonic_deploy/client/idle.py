"""A bound on each wait for a stream's next piece, with one timer per timeout rather than one per wait
(docs/client.md, "Timeouts"). Its semantics are `asyncio.timeout()`'s: only the time spent inside the block
counts, the task's own cancellation stays a `CancelledError`, and an expiry is a `TimeoutError` raised at the
end of the block; `None` is no bound, and 0 expires at once.
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType

# A timer may run up to one tick of the loop's clock early (asyncio's `_run_once`): within a tick of its
# deadline it counts as due, rather than re-armed for the same instant.
CLOCK_TICK_S = time.get_clock_info("monotonic").resolution


class IdleTimeout:
    """`with idle:` around each wait (a plain `with`: entering and leaving await nothing): at most `seconds`
    (None: no bound). One wait at a time; `close()` drops the timer once the stream is done with (else it
    fires once more, harmlessly)."""

    def __init__(self, seconds: float | None) -> None:
        self._seconds = seconds
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0
        self._due = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._expired = False

    @property
    def seconds(self) -> float | None:
        return self._seconds

    def __enter__(self) -> None:
        if self._seconds is None:
            return
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("IdleTimeout entered outside an asyncio task. Fix: enter it in a coroutine")
        if self._task is not None:
            raise RuntimeError("IdleTimeout entered by two waits at once. Fix: one IdleTimeout per stream")
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a timer of another loop (another `asyncio.run`) bounds nothing here
            self.close()
            self._loop = loop
        self._task, self._cancelling, self._expired = task, task.cancelling(), False
        self._due = loop.time() + self._seconds
        if self._handle is None:
            self._handle = loop.call_at(self._due, self._fire)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        task, self._task = self._task, None
        if self._expired and task is not None:
            self._expired = False
            if task.uncancel() <= self._cancelling and kind is asyncio.CancelledError:
                raise TimeoutError from error

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _fire(self) -> None:
        self._handle = None
        if self._task is None or self._loop is None:  # between waits: the next one arms it again
            return
        if self._loop.time() + CLOCK_TICK_S < self._due:  # a wait began since: sleep out the rest of it
            self._handle = self._loop.call_at(self._due, self._fire)
        else:
            self._expired = True
            self._task.cancel()
