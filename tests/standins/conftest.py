"""Fixtures: the stand-in server in another process, and dummy AWS credentials for the clients that sign."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import ReferenceServer, ServerFactory


@pytest.fixture
def reference_server() -> Iterator[ServerFactory]:
    started: list[ReferenceServer] = []

    def start(*options: str, ca_file: Path | None = None) -> ReferenceServer:
        """`ca_file`: the CA the harness trusts to read /stats over https (`--tls-cert`)."""
        server = ReferenceServer(*options, ca_file=ca_file)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="module")
def shared_server() -> Iterator[ServerFactory]:
    """One server per set of options for the module's tests, for tests that read none of its counters
    (admissions, faults, capacity: those count from the server's start) and inject no fault: the routes
    of one test, say, each against the same server instead of four starts of a Python process."""
    started: dict[tuple[str, ...], ReferenceServer] = {}

    def start(*options: str) -> ReferenceServer:
        if options not in started:
            started[options] = ReferenceServer(*options, exit_after_s=600)
        return started[options]

    yield start
    for server in started.values():
        server.stop()


@pytest.fixture(autouse=True)
def _dummy_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """boto3 signs requests to the reference server; it needs credentials, never real ones."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
