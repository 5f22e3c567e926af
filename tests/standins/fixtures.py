"""The stand-in server fixture (a plugin of tests/conftest.py): `reference_server(*options)` in each test,
from one pool of `probe serve --control` processes per test session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import ReferenceServer, ServerFactory, ServerPool


@pytest.fixture(scope="session")
def _server_pool() -> Iterator[ServerPool]:
    pool = ServerPool()
    yield pool
    pool.close()


@pytest.fixture
def reference_server(_server_pool: ServerPool) -> Iterator[ServerFactory]:
    """A server that does what `probe serve OPTIONS` would, its counters from zero; with TLS options (and
    `ca_file`, the CA the harness trusts to read /stats over https), a process of its own."""
    taken: list[ReferenceServer] = []
    own: list[ReferenceServer] = []

    def start(*options: str, ca_file: Path | None = None) -> ReferenceServer:
        if ca_file is not None or "--tls-cert" in options:
            own.append(ReferenceServer(*options, ca_file=ca_file))
            return own[-1]
        taken.append(_server_pool.take(options))
        return taken[-1]

    yield start
    for server in own:
        server.stop()
    for server in taken:
        _server_pool.give_back(server)
