"""`probe serve --tls-cert FILE --tls-key FILE`: the stand-in over https:// and wss://, which a client
trusts through the private CA that signed its certificate and refuses without it."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from websockets.asyncio.client import connect

from sonic_deploy.cli import main
from tests.probe.private_ca import make_private_ca

from .harness import ServerFactory
from .real_clients import FAST, KEY, RATE, stream_bytes

VOICE = "a0e99841-438c-4a64-b679-ae501e7d6091"


def test_https_and_wss_for_a_client_that_trusts_the_ca(
    tmp_path: Path, reference_server: ServerFactory
) -> None:
    ca = make_private_ca(tmp_path)
    server = reference_server(*FAST, "--tls-cert", str(ca.cert), "--tls-key", str(ca.key))
    assert server.base.startswith("https://127.0.0.1:") and server.ws_url.startswith("wss://127.0.0.1:")
    trusting = ssl.create_default_context(cafile=ca.ca)
    with urllib.request.urlopen(f"{server.base}/status", timeout=5, context=trusting) as response:
        assert json.load(response) == {"ok": True}
    # The default trust store does not hold the private CA.
    with pytest.raises(urllib.error.URLError) as refused:
        urllib.request.urlopen(f"{server.base}/status", timeout=5, context=ssl.create_default_context())
    assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)

    async def speak() -> int:
        request = {
            "model_id": "sonic-3",
            "transcript": "Hello over TLS.",
            "voice": {"mode": "id", "id": VOICE},
            "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": RATE},
            "context_id": "tls-1",
        }
        audio = 0
        async with connect(server.ws_url, ssl=trusting, additional_headers={"X-API-Key": KEY}) as socket:
            await socket.send(json.dumps(request))
            async for text in socket:
                message = json.loads(text)
                if message["type"] == "done":
                    return audio
                audio += len(base64.b64decode(message["data"]))
        raise AssertionError("the socket closed before done")

    assert asyncio.run(asyncio.wait_for(speak(), 15)) == stream_bytes("Hello over TLS.")


@pytest.mark.parametrize(("given", "missing"), [("--tls-cert", "--tls-key"), ("--tls-key", "--tls-cert")])
def test_one_tls_file_without_the_other_is_an_argparse_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str, missing: str
) -> None:
    ca = make_private_ca(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main(["probe", "serve", "--port", "0", given, str(ca.cert if given == "--tls-cert" else ca.key)])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert f"serve: {given} without {missing}: TLS needs both" in error and "Traceback" not in error


def test_files_that_are_not_a_certificate_and_key_are_an_argparse_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ca = make_private_ca(tmp_path)
    (tmp_path / "notes.txt").write_text("not a certificate\n")
    for cert, key, complaint in (
        (tmp_path / "notes.txt", ca.key, "cannot load them"),
        (ca.cert, tmp_path / "missing.pem", "--tls-key"),
    ):
        with pytest.raises(SystemExit) as exited:
            main(["probe", "serve", "--port", "0", "--tls-cert", str(cert), "--tls-key", str(key)])
        assert exited.value.code == 2
        (error,) = capsys.readouterr().err.splitlines()
        assert complaint in error and "Fix: give " in error and "PEM" in error
