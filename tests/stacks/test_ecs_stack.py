"""The ECS stack as a whole: snapshot, outputs, no warnings; and the air-gapped variant."""

from __future__ import annotations

import base64
import http.server
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest
from aws_cdk import Stack
from aws_cdk.assertions import Annotations, Match, Template
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from sonic_deploy.config import Settings
from sonic_deploy.routes.licence_loader import loader_script
from tests.conftest import EditConfig, rendered, resources_of, synthesize_from
from tests.snapshot import scrubbed


def test_snapshot(ecs_template: Template, snapshot: SnapshotAssertion) -> None:
    assert scrubbed(ecs_template.to_json()) == snapshot(extension_class=JSONSnapshotExtension)


def test_no_errors_and_no_warnings_but_the_placeholders(ecs_stack: Stack, dev_settings: Settings) -> None:
    """Synth of the shipped config goes on, warning once per placeholder with its file, field and fix, and
    once on the plain listener."""
    annotations = Annotations.from_stack(ecs_stack)
    assert annotations.find_error("*", Match.any_value()) == []
    warnings = [str(w.entry.data) for w in annotations.find_warning("*", Match.any_value())]
    expected = [
        f"placeholder: {p} [ack: sonic-deploy:placeholder:{p.field}]"
        for p in dev_settings.placeholders["ecs"]
    ]
    # dev's listener is plain TCP (ecs.api.tls = false): warned on the listener itself.
    plain = [w for w in warnings if w.startswith("plain TCP listener")]
    assert expected and len(plain) == 1 and [w for w in warnings if w not in plain] == expected


def test_outputs(ecs_template: Template) -> None:
    outputs = ecs_template.to_json()["Outputs"]
    assert {"ApiUrl", "ClusterName", "AvailabilityZone", "GpuWorkerRepository", "PlacementGroupArn"} <= set(
        outputs
    )
    assert "FallbackPlacementGroupArn" not in outputs  # no fallback AZ in dev by default
    assert outputs["AvailabilityZone"]["Value"] == "us-east-2a"
    # What `sonic-deploy connect` prints for an agent: the defaults (model: the Sonic version), the key's
    # secret by name and never a value.
    assert outputs["ModelId"]["Value"] == "sonic-3"
    assert outputs["CartesiaVersion"]["Value"] == "2025-04-16"
    assert outputs["ApiKeySecret"]["Value"] == "sonic/dev/cartesia-api-key"
    assert outputs["Region"]["Value"] == "us-east-2"
    assert rendered(outputs["ApiUrl"]["Value"]) == "ws://CFN_Fn_GetAtt:80/tts/websocket"


def test_model_id_and_api_version_come_from_config(edit_config: EditConfig) -> None:
    config = edit_config(
        "environments/dev.toml",
        'cartesia_version = "2025-04-16"',
        'model_id = "sonic-3-selfhosted"\ncartesia_version = "2026-03-01"',
    )
    outputs = Template.from_stack(synthesize_from(config, routes=["ecs"])["ecs"]).to_json()["Outputs"]
    assert outputs["ModelId"]["Value"] == "sonic-3-selfhosted"
    assert outputs["CartesiaVersion"]["Value"] == "2026-03-01"


def test_air_gapped_has_no_egress_and_keeps_the_licence(air_gapped: Template) -> None:
    template = air_gapped
    template.resource_count_is("AWS::EC2::NatGateway", 0)
    template.resource_count_is("AWS::EC2::InternetGateway", 0)
    template.has_resource(
        "AWS::EFS::FileSystem",
        {
            "Properties": Match.object_like({"Encrypted": True, "KmsKeyId": Match.any_value()}),
            "DeletionPolicy": "RetainExceptOnCreate",
        },
    )
    licence = next(
        t["Properties"]
        for k, t in resources_of(template, "AWS::ECS::TaskDefinition").items()
        if k.startswith("SonicLicenceProxy")
    )
    efs_volume = licence["Volumes"][0]["EFSVolumeConfiguration"]
    assert efs_volume["TransitEncryption"] == "ENABLED"
    assert efs_volume["AuthorizationConfig"] == {"IAM": "ENABLED"}  # the file system refuses anonymous mounts
    # Only the proxy's role may write (the file system's policy: tests/routes/ecs/constructs/test_licence_store.py).
    (file_system,) = resources_of(template, "AWS::EFS::FileSystem").values()
    assert "elasticfilesystem:ClientWrite" in str(file_system["Properties"]["FileSystemPolicy"])
    assert licence["ContainerDefinitions"][0]["MountPoints"] == [
        {"ContainerPath": "/data", "ReadOnly": False, "SourceVolume": "licence"}
    ]
    # Without NAT, AWS services are reached through endpoints only.
    services = {
        str(e["Properties"]["ServiceName"]) for e in resources_of(template, "AWS::EC2::VPCEndpoint").values()
    }
    assert any("ecr.dkr" in s for s in services) and any("secretsmanager" in s for s in services)
    assert "com.amazonaws.us-east-2.ec2" in services  # the GPU agent's DescribeTags


def _licence_task(template: Template) -> dict[str, Any]:
    return next(
        dict(t["Properties"])
        for k, t in resources_of(template, "AWS::ECS::TaskDefinition").items()
        if k.startswith("SonicLicenceProxy")
    )


def test_air_gapped_loads_the_licence_from_its_secret_into_the_proxy(air_gapped: Template) -> None:
    """No way in from outside: ECS reads the secret at task start, a loader POSTs it on localhost."""
    proxy, loader = _licence_task(air_gapped)["ContainerDefinitions"]
    assert loader["Name"] == "licence-loader" and loader["Essential"] is False
    assert loader["DependsOn"] == [{"Condition": "START", "ContainerName": proxy["Name"]}]
    ((name, value_from),) = [(s["Name"], rendered(s["ValueFrom"])) for s in loader["Secrets"]]
    assert name == "SONIC_LICENCE" and value_from.endswith(":secret:sonic/dev/cartesia-licence")
    # The operator's secret, imported by name: nothing named for a later stack to trip over.
    air_gapped.resource_count_is("AWS::SecretsManager::Secret", 0)
    assert loader["EntryPoint"] == ["/bin/sh", "-c"]
    (script,) = loader["Command"]
    assert "http://127.0.0.1:8080/license" in script  # the proxy's port from config
    assert subprocess.run(["sh", "-n"], input=script, text=True, check=False).returncode == 0
    assert {"LicenceProxyService", "ClusterName"} <= set(air_gapped.to_json()["Outputs"])


class _Proxy(http.server.BaseHTTPRequestHandler):
    """The licence proxy's POST /license as the loader meets it: refused until `ready`, then kept."""

    ready_after = 2
    seen: ClassVar[list[tuple[str, str, bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.seen.append((self.path, self.headers.get("Content-Type", ""), body))
        self.send_response(200 if len(self.seen) > self.ready_after else 503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _run_under_busybox(script: str, tmp_path: Path, *, timeout: float) -> subprocess.CompletedProcess[str]:
    """The loader as the image runs it: BusyBox applets as the only commands there are."""
    applets = tmp_path / "bin"
    applets.mkdir()
    for applet in ("sh", "base64", "wget", "sleep", "printf", "echo", "timeout"):
        (applets / applet).symlink_to(str(shutil.which("busybox")))
    env = {"PATH": str(applets), "SONIC_LICENCE": base64.b64encode(LICENCE_TEXT).decode()}
    return subprocess.run(
        [str(applets / "sh"), "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.skipif(
    shutil.which("busybox") is None, reason="needs busybox (.ci/run installs it: apt-get install busybox)"
)
def test_the_loader_hands_the_licence_to_the_proxy_with_busybox(tmp_path: Path) -> None:
    """The loader's script under BusyBox itself (sh, base64, wget, as in the image), against a stand-in proxy
    on loopback that refuses twice before it is ready."""
    _Proxy.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        script = loader_script(port=port, content_type="application/octet-stream").replace(
            "sleep 5", "sleep 0"
        )
        done = _run_under_busybox(script, tmp_path, timeout=60)
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "licence uploaded to the licence proxy"
    assert len(_Proxy.seen) == 3
    assert _Proxy.seen[-1] == ("/license", "application/octet-stream", LICENCE_TEXT)


class _SilentProxy(http.server.BaseHTTPRequestHandler):
    """A proxy that takes the first upload's connection and never answers it, then answers the next."""

    seen: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.seen.append(self.path)
        if len(self.seen) == 1:
            threading.Event().wait(30)  # longer than the test lets the loader run
            return
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.skipif(
    shutil.which("busybox") is None, reason="needs busybox (.ci/run installs it: apt-get install busybox)"
)
def test_the_loader_gives_up_on_a_try_the_proxy_never_answers(tmp_path: Path) -> None:
    """wget has no timeout of its own: without one, a hung first try would hold the loader for good."""
    _SilentProxy.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SilentProxy)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        script = loader_script(port=server.server_address[1], content_type="application/octet-stream")
        script = script.replace("sleep 5", "sleep 0").replace("timeout 10 ", "timeout 1 ")
        done = _run_under_busybox(script, tmp_path, timeout=20)
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr
    assert len(_SilentProxy.seen) == 2


def test_the_loader_exits_1_when_the_proxy_never_takes_it(tmp_path: Path) -> None:
    """What `sonic-deploy licence upload` reads: the loader's exit code (wget stood in, failing always)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool, body in (("wget", "exit 1"), ("sleep", "exit 0"), ("timeout", 'shift; exec "$@"')):
        (bin_dir / tool).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / tool).chmod(0o755)
    script = loader_script(port=8080, content_type="application/octet-stream")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SONIC_LICENCE": base64.b64encode(LICENCE_TEXT).decode()}
    done = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert "did not accept the licence after 60 tries" in done.stderr


LICENCE_TEXT = (
    b"-----BEGIN CARTESIA LICENCE-----\n" + base64.b64encode(bytes(range(256))) + b"\n-----END-----\n"
)
