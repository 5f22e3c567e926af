"""Ctrl-C while a command is still loading its modules (a second or two: pydantic, aws_cdk): one line and
exit 130, not a KeyboardInterrupt traceback from deep inside an import. Light on purpose (only the standard
library): it must be in place before the heavy imports start."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def quiet_ctrl_c(line: str) -> Iterator[None]:
    """Within the block, SIGINT prints `line` and exits 128 + SIGINT; afterwards the handler in place before
    (Python's KeyboardInterrupt, which the command's own `main` handles) is back. Where SIGINT is ignored (a
    background job) it stays ignored, and off the main thread (which alone may set handlers) nothing changes."""
    previous = signal.getsignal(signal.SIGINT)
    if (
        previous is not signal.default_int_handler
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return

    def stop(signum: int, _frame: FrameType | None) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with contextlib.suppress(OSError):  # whoever read stderr may be gone
            print(line, file=sys.stderr, flush=True)
        # Not SystemExit: its atexit hooks would stop a jsii kernel the same Ctrl-C has already stopped (a
        # BrokenPipeError traceback); nothing is written yet, and the kernel exits when its pipe closes.
        os._exit(128 + signum)

    signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
