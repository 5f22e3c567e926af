"""`probe serve --control`: one process told new options between tests (`POST /control`), its counts from
zero each time; what only a new process can change, and a bad value, refused with the option named."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from sonic_deploy.standins.reference_stream import ServerConfig
from sonic_deploy.standins.server import build_app

from .harness import ReferenceServer, ServerFactory
from .real_clients import KEY

BODY = {
    "model_id": "sonic-3",
    "transcript": "Hello.",
    "voice": {"mode": "id", "id": "a0e99841-438c-4a64-b679-ae501e7d6091"},
    "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 8000},
}


def _post(url: str, body: object, key: str = KEY) -> int:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"X-API-Key": key, "Cartesia-Version": "2026-08-14", "Content-Type": "application/json"}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data, headers), timeout=5) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def _refusal(server: ReferenceServer, *options: str) -> str:
    with pytest.raises(AssertionError) as refused:
        server.reconfigure(*options)
    return str(refused.value)


def test_new_options_apply_from_zero_counts(reference_server: ServerFactory) -> None:
    server = reference_server("--api-key", KEY, "--first-byte-ms", "1", "--pace", "0")
    assert _post(server.http_url, BODY, key="wrong") == 401
    assert _post(server.http_url, BODY) == 200
    assert server.stats()["admitted"] == 1

    server.reconfigure("--first-byte-ms", "1", "--fault", "status422")
    assert "admitted" not in server.stats()
    assert _post(server.http_url, BODY, key="any key now") == 422
    assert server.stats()["fault_status422"] == 1


def test_what_only_a_new_process_changes_and_bad_values_are_refused(reference_server: ServerFactory) -> None:
    server = reference_server("--capacity", "1")
    assert "--port: only a new process can change it" in _refusal(server, "--port", "9")
    assert "--tls-cert: only a new process" in _refusal(server, "--tls-cert=cert.pem", "--tls-key=key.pem")
    assert "--pace '-1': out of range" in _refusal(server, "--pace", "-1")
    assert "unrecognized arguments: --bogus" in _refusal(server, "--bogus")
    assert _post(f"{server.base}/control", b"not json") == 400
    assert _post(f"{server.base}/control", {"options": "--pace 1"}) == 400
    # A refused change changes nothing: still at most one stream, counted from its start.
    assert server.stats() == {"active": 0, "first_byte_lateness_ms": server.stats()["first_byte_lateness_ms"]}


def test_only_a_server_started_with_control_takes_new_options() -> None:
    paths = {resource.canonical for resource in build_app(ServerConfig()).router.resources()}
    assert "/stats" in paths and "/control" not in paths
    assert "/control" in {
        r.canonical for r in build_app(ServerConfig(), lambda options: ServerConfig()).router.resources()
    }
