"""Commands started as a terminal starts a foreground job, for the tests that press Ctrl-C on them."""

from __future__ import annotations

import signal
import subprocess
from typing import Any


def foreground(command: list[str], **options: Any) -> subprocess.Popen[str]:
    """`command` started with SIGINT at its default, whatever the test runner's: a `make test` run in the
    background (a non-interactive shell's `&`) ignores SIGINT, a child inherits that, and Python then installs
    no KeyboardInterrupt handler, so a Ctrl-C test would hang or fail."""
    previous = signal.signal(signal.SIGINT, signal.SIG_DFL)  # the child keeps it across exec
    try:
        return subprocess.Popen(command, text=True, start_new_session=True, **options)
    finally:
        signal.signal(signal.SIGINT, previous)
