"""What the tests of real Cartesia clients against `probe serve` share: the key, the audio format, the
audio a stream carries by the server's own schedule, and a wait for the server's counters."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from sonic_deploy.audio import AudioFormat
from sonic_deploy.standins.reference_stream import ReferenceBehaviour, ServerConfig

from .harness import ReferenceServer

KEY = "sk_test_real_clients"
RATE: Final = 24000
# Short streams, sent flat out: the tests read what arrives, never when.
FAST = ("--api-key", KEY, "--first-byte-ms", "5", "--pace", "0")
# Streams in real time (one 20 ms chunk every 20 ms): long enough to act on one mid-way.
PACED = ("--api-key", KEY, "--first-byte-ms", "5", "--pace", "1")
# What a context's streams waits for, at most, whatever the machine's load.
TIMEOUT_S = 15.0


def stream_bytes(
    text: str, rate: int = RATE, encoding: str = "pcm_s16le", audio_ms: int | None = None
) -> int:
    """The audio bytes of one fault-free stream of `text`, by the server's own schedule (default options)."""
    behaviour = ReferenceBehaviour(ServerConfig(audio_ms=audio_ms))
    return behaviour.stream_bytes(text, AudioFormat(encoding, rate))


def wait_for_stats(
    server: ReferenceServer, ready: Callable[[dict[str, Any]], bool], timeout_s: float = TIMEOUT_S
) -> dict[str, Any]:
    """The server's counters once `ready` holds: a stream is released just after its last message went
    out, so a client may see the end before the counters do."""
    deadline = time.monotonic() + timeout_s
    while True:
        stats = server.stats()
        if ready(stats) or time.monotonic() > deadline:
            return stats
        time.sleep(0.02)


def counted(stats: dict[str, Any], prefix: str) -> dict[str, int]:
    """The counters named `prefix:...` (the API versions, or the credential forms), by value."""
    return {name.split(":", 1)[1]: count for name, count in stats.items() if name.startswith(f"{prefix}:")}
