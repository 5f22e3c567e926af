"""`--ca-bundle FILE` on the probe: against `probe serve --tls-cert --tls-key` with a certificate a private
CA signed, the probe's streams succeed when it trusts that CA and each fails as kind `tls` when it does not;
a file that is no CA bundle is one argparse error line naming the option and the fix."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from sonic_deploy.cli import main
from sonic_deploy.client.trust import CaBundleError, ca_context
from tests.standins.harness import ServerFactory

from .harness import ProbeRun
from .private_ca import make_private_ca

Run = Callable[..., ProbeRun]
FAST = ("--first-byte-ms", "10", "--audio-ms", "40")
LEVEL = ("--concurrency", "2", "--requests", "4", "--warmup", "0")


@pytest.mark.parametrize("route", ["ws", "http"])
def test_the_probe_trusts_a_private_ca_only_when_given_its_bundle(
    route: str, tmp_path: Path, reference_server: ServerFactory, run_probe: Run
) -> None:
    ca = make_private_ca(tmp_path)
    server = reference_server(*FAST, "--tls-cert", str(ca.cert), "--tls-key", str(ca.key), ca_file=ca.ca)
    url = server.ws_url if route == "ws" else server.http_url
    assert url.startswith(("wss://", "https://"))
    trusted = run_probe(route, "--url", url, "--ca-bundle", str(ca.ca), *LEVEL)
    assert trusted.exit_code == 0
    assert trusted.level()["ok"] == 4 and trusted.level()["errors"] == {}
    assert trusted.summary["target"]["ca_bundle"] == str(ca.ca)
    untrusted = run_probe(route, "--url", url, *LEVEL)
    assert untrusted.level()["ok"] == 0
    assert untrusted.level()["errors"] == {"tls": 4}
    assert all(s["error"] == "tls" and "CERTIFICATE_VERIFY_FAILED" in str(s) for s in untrusted.measured)


def test_probe_turn_takes_the_bundle_for_the_ecs_tts_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --route sagemaker the bundle would be ignored (SageMaker presents AWS's certificates)."""
    ca = make_private_ca(tmp_path)
    turn = ["probe", "turn", "--endpoint", "x", "--llm-model", "m", "--ca-bundle", str(ca.ca)]
    with pytest.raises(SystemExit) as exited:
        main([*turn, "--route", "sagemaker"])
    assert exited.value.code == 2
    assert (
        "probe turn: --ca-bundle is for --route ecs or eks, not --route sagemaker: drop it"
        in capsys.readouterr().err
    )


@pytest.mark.parametrize(
    "command",
    [
        ["probe", "ws", "--url", "wss://127.0.0.1:1/tts/websocket"],
        ["probe", "http", "--url", "https://127.0.0.1:1/tts/bytes"],
        ["probe", "turn", "--route", "ecs", "--tts-url", "wss://127.0.0.1:1/tts/websocket"],
    ],
)
@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "cannot read {file}: No such file or directory"),
        (b"not a certificate\n", "{file} holds no PEM certificate"),
        (b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "{file}: OpenSSL cannot load"),
    ],
)
def test_a_file_that_is_no_ca_bundle_is_one_error_line(
    command: list[str],
    content: bytes | None,
    problem: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bundle = tmp_path / "ca.pem"
    if content is not None:
        bundle.write_bytes(content)
    with pytest.raises(SystemExit) as exited:
        main([*command, "--ca-bundle", str(bundle)])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    (line,) = error.splitlines()
    assert f"--ca-bundle {problem.format(file=bundle)}" in line
    assert "Fix: " in line and "Traceback" not in error


def test_a_subordinate_cas_certificate_alone_is_enough(
    tmp_path: Path, reference_server: ServerFactory, run_probe: Run
) -> None:
    """What `aws acm-pca get-certificate-authority-certificate --query Certificate` gives for a subordinate
    Private CA: its own certificate, without the root above it."""
    ca = make_private_ca(tmp_path, subordinate=True)
    server = reference_server(*FAST, "--tls-cert", str(ca.cert), "--tls-key", str(ca.key), ca_file=ca.ca)
    trusted = run_probe("ws", "--url", server.ws_url, "--ca-bundle", str(ca.ca), *LEVEL)
    assert trusted.level()["ok"] == 4 and trusted.level()["errors"] == {}


def test_the_context_trusts_the_bundle_alone(tmp_path: Path) -> None:
    ca = make_private_ca(tmp_path)
    context = ca_context(ca.ca)
    (trusted,) = context.get_ca_certs()
    assert trusted["subject"] == ((("commonName", "sonic-deploy test private CA"),),)
    assert context.check_hostname
    with pytest.raises(CaBundleError, match="holds no PEM certificate"):
        ca_context(ca.key)
