"""The stand-in server (`probe serve`) in another process."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import urllib.error
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

    def reconfigure(self, *options: str) -> None:
        """Do what `probe serve OPTIONS` would, from zero counts (a server started with `--control`)."""
        request = urllib.request.Request(
            f"{self.base}/control",
            data=json.dumps({"options": list(options)}).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=5, context=self._context):
                pass
        except urllib.error.HTTPError as error:
            said = json.loads(error.read())["message"]
            raise AssertionError(f"probe serve refused {options}: {said}") from None

    def stop(self) -> None:
        # Killed, not terminated: a graceful stop waits for streams still open (a stalled one: seconds),
        # and nothing the server does once the test is over is checked.
        self.process.kill()
        self.process.wait(timeout=5)


ServerFactory = Callable[..., ReferenceServer]


class ServerPool:
    """Servers started with `--control`, each handed to one test at a time and told that test's options:
    a test takes a running process instead of starting one (about 0.5 CPU-s each)."""

    def __init__(self) -> None:
        self._free: list[ReferenceServer] = []
        self._started: list[ReferenceServer] = []

    def take(self, options: tuple[str, ...]) -> ReferenceServer:
        while self._free:
            server = self._free.pop()
            try:
                server.reconfigure(*options)
                return server
            except OSError:  # a test killed it (it may still be going)
                server.stop()
        server = ReferenceServer("--control", *options, exit_after_s=3600)
        self._started.append(server)
        return server

    def give_back(self, server: ReferenceServer) -> None:
        self._free.append(server)

    def close(self) -> None:
        for server in self._started:
            server.stop()
