"""The stand-in server (`probe serve`) in another process."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any


class ReferenceServer:
    def __init__(self, *options: str, exit_after_s: int = 120, ca_file: Path | None = None) -> None:
        """`exit_after_s`: the server's own deadline, should the test process die without stopping it;
        `ca_file`: the CA that signed its certificate, when `options` serve TLS (for `stats()`)."""
        command = [sys.executable, "-m", "sonic_deploy.cli", "probe", "serve", "--port", "0"]
        self.process = subprocess.Popen(
            [*command, "--exit-after", str(exit_after_s), *options], stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line.startswith(("listening on http://", "listening on https://")), (
            f"server did not start: {line!r}"
        )
        self.base = line.split("listening on ")[1].strip()
        self.port = int(self.base.rsplit(":", 1)[1])
        self.tls = self.base.startswith("https://")
        self._context = ssl.create_default_context(cafile=ca_file) if ca_file else None

    @property
    def ws_url(self) -> str:
        return f"{'wss' if self.tls else 'ws'}://127.0.0.1:{self.port}/tts/websocket"

    @property
    def http_url(self) -> str:
        return f"{self.base}/tts/bytes"

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.base}/stats", timeout=5, context=self._context) as response:
            stats: dict[str, Any] = json.load(response)
        return stats

    def stop(self) -> None:
        # Killed, not terminated: a graceful stop waits for streams still open (a stalled one: seconds),
        # and nothing the server does once the test is over is checked.
        self.process.kill()
        self.process.wait(timeout=5)


ServerFactory = Callable[..., ReferenceServer]
