"""The ECS stack as a whole: snapshot, outputs, no warnings; and the air-gapped variant."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk.assertions import Annotations, Match, Template
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from sonic_deploy.config import Settings
from sonic_deploy.constructs.licence_store import NO_LICENCE_YET, loader_script
from tests.conftest import CONFIG_DIR, resources_of, synthesize_from
from tests.snapshot import scrubbed


def test_snapshot(ecs_template: Template, snapshot: SnapshotAssertion) -> None:
    assert scrubbed(ecs_template.to_json()) == snapshot(extension_class=JSONSnapshotExtension)


def test_no_errors_and_no_warnings_but_the_placeholders(ecs_stack: Stack, dev_settings: Settings) -> None:
    """Synth of the shipped config goes on, warning once per placeholder with its file, field and fix."""
    annotations = Annotations.from_stack(ecs_stack)
    assert annotations.find_error("*", Match.any_value()) == []
    warnings = [str(w.entry.data) for w in annotations.find_warning("*", Match.any_value())]
    expected = [
        f"placeholder: {p} [ack: sonic-deploy:placeholder:{p.field}]"
        for p in dev_settings.placeholders["ecs"]
    ]
    assert expected and warnings == expected


def test_outputs(ecs_template: Template) -> None:
    outputs = ecs_template.to_json()["Outputs"]
    assert {"ApiUrl", "ClusterName", "AvailabilityZone", "GpuWorkerRepository"} <= set(outputs)
    assert outputs["AvailabilityZone"]["Value"] == "us-east-2a"


@pytest.fixture(scope="module")
def air_gapped(tmp_path_factory: pytest.TempPathFactory) -> Template:
    config = tmp_path_factory.mktemp("air-gapped") / "config"
    shutil.copytree(CONFIG_DIR, config)
    dev = config / "environments/dev.toml"
    text = dev.read_text().replace('licence_mode = "connected"', 'licence_mode = "air-gapped"')
    dev.write_text(text.replace("nat_gateways = 1", "nat_gateways = 0"))
    return Template.from_stack(synthesize_from(config)["ecs"])


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
    role = licence["TaskRoleArn"]["Fn::GetAtt"][0]
    grants = [
        p
        for p in resources_of(template, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
    ]
    assert "elasticfilesystem:ClientWrite" in str(grants)
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
    (secret_key,) = resources_of(air_gapped, "AWS::SecretsManager::Secret")
    assert loader["Secrets"] == [{"Name": "SONIC_LICENCE", "ValueFrom": {"Ref": secret_key}}]
    secret = resources_of(air_gapped, "AWS::SecretsManager::Secret")[secret_key]
    assert secret["Properties"]["Name"] == "sonic/dev/cartesia-licence"
    assert secret["Properties"]["SecretString"] == NO_LICENCE_YET
    assert "KmsKeyId" in secret["Properties"] and secret["DeletionPolicy"] == "RetainExceptOnCreate"
    assert loader["EntryPoint"] == ["/bin/sh", "-c"]
    (script,) = loader["Command"]
    assert "http://127.0.0.1:8080/license" in script  # the proxy's port from config
    assert subprocess.run(["sh", "-n"], input=script, text=True, check=False).returncode == 0
    outputs = air_gapped.to_json()["Outputs"]
    assert outputs["LicenceSecretArn"]["Value"] == {"Ref": secret_key}
    assert {"LicenceProxyService", "ClusterName"} <= set(outputs)


def test_the_loader_uploads_once_the_proxy_answers_and_skips_an_empty_secret(tmp_path: Path) -> None:
    """The loader's script run for real (sh, base64; wget stood in by a script that records its call)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    fake_wget = bin_dir / "wget"
    # Fails twice (the proxy not up yet), then accepts; keeps the file it was given.
    fake_wget.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        f'[ "$(wc -l < {calls})" -ge 3 ] || exit 4\n'
        f'for a in "$@"; do [ -f "$a" ] && cp "$a" {tmp_path / "posted"}; done; exit 0\n'
    )
    fake_wget.chmod(0o755)
    (bin_dir / "sleep").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "sleep").chmod(0o755)
    script = loader_script(port=8080, content_type="application/octet-stream")
    licence = bytes(range(256))  # any bytes: the secret holds them base64-encoded
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "SONIC_LICENCE": base64.b64encode(licence).decode()}
    done = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "licence uploaded to the licence proxy"
    assert (tmp_path / "posted").read_bytes() == licence
    assert calls.read_text().count("--post-file") == 3
    assert "--header Content-Type: application/octet-stream" in calls.read_text()

    calls.unlink()
    env["SONIC_LICENCE"] = NO_LICENCE_YET
    done = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, check=False)
    assert (done.returncode, calls.exists()) == (0, False)
    assert "no licence uploaded yet" in done.stdout
