"""`sonic-deploy licence upload`: Secrets Manager and CloudFormation from moto; ECS from botocore's Stubber
(moto neither finishes a rollout nor runs a service's tasks), so every ECS request and answer is checked
against the service's own model."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from sonic_deploy.cli import main
from sonic_deploy.config import Settings, load_settings
from sonic_deploy.licence.command import MAX_LICENCE_BYTES, LicenceClients, LicenceError, upload_licence

REGION = "us-east-2"
STACK = "sonic-dev-ecs"
SECRET = "sonic/dev/cartesia-licence"
CLUSTER, SERVICE = "sonic-dev", "licence-proxy"
NEW_TASK_DEFINITION = "arn:aws:ecs:us-east-2:123456789012:task-definition/licence-proxy:2"
TASK = "arn:aws:ecs:us-east-2:123456789012:task/sonic-dev/0123456789abcdef0123456789abcdef"


@pytest.fixture
def settings(deployable_config: Path) -> Settings:
    dev = deployable_config / "environments/dev.toml"
    text = dev.read_text().replace('licence_mode = "connected"', 'licence_mode = "air-gapped"')
    dev.write_text(text.replace("nat_gateways = 1", "nat_gateways = 0"))
    return load_settings(deployable_config, "dev")


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[LicenceClients, Stubber]]:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        ecs = boto3.client("ecs", region_name=REGION)
        clients = LicenceClients(
            cloudformation=boto3.client("cloudformation", region_name=REGION),
            secretsmanager=boto3.client("secretsmanager", region_name=REGION),
            ecs=ecs,
        )
        with Stubber(ecs) as stubbed:
            yield clients, stubbed
            stubbed.assert_no_pending_responses()


def deploy_stack(clients: LicenceClients, *, outputs: bool = True) -> None:
    template: dict[str, Any] = {"Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}}
    if outputs:
        template["Outputs"] = {"ClusterName": {"Value": CLUSTER}, "LicenceProxyService": {"Value": SERVICE}}
    clients.cloudformation.create_stack(StackName=STACK, TemplateBody=json.dumps(template))


def expect_rollout(ecs: Stubber, *states: str) -> None:
    ecs.add_response(
        "update_service",
        {"service": {"serviceName": SERVICE}},
        {"cluster": CLUSTER, "service": SERVICE, "forceNewDeployment": True},
    )
    for state in states:
        deployment = {"status": "PRIMARY", "taskDefinition": NEW_TASK_DEFINITION, "rolloutState": state}
        if state == "FAILED":
            deployment["rolloutStateReason"] = "tasks failed to start"
        ecs.add_response(
            "describe_services",
            {"services": [{"serviceName": SERVICE, "deployments": [deployment]}], "failures": []},
            {"cluster": CLUSTER, "services": [SERVICE]},
        )


def expect_loader(ecs: Stubber, *exit_codes: int | None) -> None:
    for code in exit_codes:
        ecs.add_response(
            "list_tasks",
            {"taskArns": [TASK]},
            {"cluster": CLUSTER, "serviceName": SERVICE, "desiredStatus": "RUNNING"},
        )
        loader: dict[str, Any] = {
            "name": "licence-loader",
            "lastStatus": "RUNNING" if code is None else "STOPPED",
        }
        if code is not None:
            loader["exitCode"] = code
        ecs.add_response(
            "describe_tasks",
            {
                "tasks": [
                    {
                        "taskArn": TASK,
                        "taskDefinitionArn": NEW_TASK_DEFINITION,
                        "containers": [{"name": "licence-proxy", "lastStatus": "RUNNING"}, loader],
                    }
                ],
                "failures": [],
            },
            {"cluster": CLUSTER, "tasks": [TASK]},
        )


LICENCE = b"-----BEGIN CARTESIA LICENCE-----\nabc\n-----END CARTESIA LICENCE-----\n"


def test_before_the_first_deploy_the_secret_is_created_and_nothing_else(
    aws: tuple[LicenceClients, Stubber], settings: Settings
) -> None:
    clients, _ = aws
    said: list[str] = []
    upload_licence(clients, settings, LICENCE, say=said.append)
    stored = clients.secretsmanager.get_secret_value(SecretId=SECRET)["SecretString"]
    assert base64.b64decode(stored) == LICENCE
    assert said == [
        f"licence stored in the secret {SECRET}",
        f"{STACK} is not deployed yet: deploy it now; the licence proxy loads the licence when it starts",
    ]


def test_a_new_licence_redeploys_the_proxy_and_waits_for_the_loader(
    aws: tuple[LicenceClients, Stubber], settings: Settings
) -> None:
    clients, ecs = aws
    clients.secretsmanager.create_secret(Name=SECRET, SecretString="old")
    deploy_stack(clients)
    expect_rollout(ecs, "IN_PROGRESS", "COMPLETED")
    expect_loader(ecs, None, 0)
    said: list[str] = []
    slept: list[float] = []
    upload_licence(clients, settings, LICENCE, say=said.append, sleep=slept.append)
    assert (
        base64.b64decode(clients.secretsmanager.get_secret_value(SecretId=SECRET)["SecretString"]) == LICENCE
    )
    assert slept == [10, 10]  # once for the rollout, once for the loader
    assert (
        said[-1]
        == "the licence proxy took the licence (the licence-loader container of the new licence-proxy task exited 0)"
    )


def test_a_loader_that_failed_is_reported_with_where_to_look(
    aws: tuple[LicenceClients, Stubber], settings: Settings
) -> None:
    clients, ecs = aws
    deploy_stack(clients)
    expect_rollout(ecs, "COMPLETED")
    expect_loader(ecs, 1)
    with pytest.raises(
        LicenceError, match="the licence-loader container exited 1: the licence proxy did not take"
    ):
        upload_licence(clients, settings, LICENCE, say=lambda _: None, sleep=lambda _: None)


def test_a_failed_rollout_is_reported(aws: tuple[LicenceClients, Stubber], settings: Settings) -> None:
    clients, ecs = aws
    deploy_stack(clients)
    expect_rollout(ecs, "IN_PROGRESS", "FAILED")
    with pytest.raises(LicenceError, match="deployment of licence-proxy failed: tasks failed to start"):
        upload_licence(clients, settings, LICENCE, say=lambda _: None, sleep=lambda _: None)


def test_a_slow_rollout_gives_up_at_the_timeout(
    aws: tuple[LicenceClients, Stubber], settings: Settings
) -> None:
    clients, ecs = aws
    deploy_stack(clients)
    expect_rollout(ecs, "IN_PROGRESS", "IN_PROGRESS")
    clock = iter([0.0, 100.0, 1000.0])
    with pytest.raises(LicenceError, match=r"still IN_PROGRESS after 900 s"):
        upload_licence(
            clients, settings, LICENCE, say=lambda _: None, sleep=lambda _: None, clock=lambda: next(clock)
        )


def test_a_missing_service_is_named(aws: tuple[LicenceClients, Stubber], settings: Settings) -> None:
    clients, ecs = aws
    deploy_stack(clients)
    ecs.add_response("update_service", {"service": {"serviceName": SERVICE}})
    ecs.add_response(
        "describe_services", {"services": [], "failures": [{"arn": SERVICE, "reason": "MISSING"}]}
    )
    with pytest.raises(LicenceError, match="service licence-proxy is not in cluster sonic-dev"):
        upload_licence(clients, settings, LICENCE, say=lambda _: None)


def test_a_stack_without_the_loader_is_named_with_the_fix(
    aws: tuple[LicenceClients, Stubber], settings: Settings
) -> None:
    clients, _ = aws
    deploy_stack(clients, outputs=False)
    with pytest.raises(LicenceError, match="has no output ClusterName, LicenceProxyService"):
        upload_licence(clients, settings, LICENCE, say=lambda _: None)


def test_command_line_errors_are_one_line(
    tmp_path: Path, deployable_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def licence(*args: str) -> tuple[int, str]:
        try:
            code = main(["licence", "upload", "--env", "dev", "--config-dir", str(deployable_config), *args])
        except SystemExit as stopped:  # a mistake in the arguments or the file: before any AWS call
            code = int(stopped.code or 0)
        error = capsys.readouterr().err
        assert len(error.strip().splitlines()) == 1
        return code, error

    code, error = licence("--file", str(tmp_path / "missing.lic"))
    assert code == 2 and error.startswith(
        f"sonic-deploy licence upload: --file '{tmp_path}/missing.lic': cannot read"
    )
    (tmp_path / "empty.lic").write_bytes(b"")
    assert licence("--file", str(tmp_path / "empty.lic")) == (
        2,
        f"sonic-deploy licence upload: --file '{tmp_path}/empty.lic': the file is empty. Fix: give the path of "
        "the offline licence file from Cartesia\n",
    )
    (tmp_path / "huge.lic").write_bytes(b"x" * (MAX_LICENCE_BYTES + 1))
    assert "more than a secret holds" in licence("--file", str(tmp_path / "huge.lic"))[1]
    (tmp_path / "binary.lic").write_bytes(b"lic\0ence")
    code, error = licence("--file", str(tmp_path / "binary.lic"))
    assert code == 2 and "holds NUL bytes, which the loader's BusyBox wget" in error
    (tmp_path / "ok.lic").write_bytes(b"licence")
    code, error = licence("--file", str(tmp_path / "ok.lic"))  # dev is connected
    assert code == 1 and 'licence_mode = "connected"' in error and "Traceback" not in error
    assert len(error.strip().splitlines()) == 1


def test_unreachable_aws_is_one_line_with_the_fix(
    tmp_path: Path, settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    (tmp_path / "ok.lic").write_bytes(LICENCE)
    args = ["licence", "upload", "--env", "dev", "--config-dir", str(settings.config_dir), "--file"]
    assert main([*args, str(tmp_path / "ok.lic"), "--profile", "nosuch"]) == 1
    error = capsys.readouterr().err
    assert error.startswith(
        "sonic-deploy licence: AWS refused or could not be reached: The config profile (nosuch)"
    )
    assert "Fix: check --profile" in error and len(error.strip().splitlines()) == 1


def test_on_eks_the_licence_is_stored_and_the_loader_takes_it_without_a_restart(
    aws: tuple[LicenceClients, Stubber], deployable_config: Path
) -> None:
    """EKS's loader watches the mounted secret (docs/eks.md, section 12): no stack, no ECS call (the stubbed
    ECS client would fail on any)."""
    env = deployable_config / "environments/dev-eks.toml"
    text = env.read_text().replace('licence_mode = "connected" ', 'licence_mode = "air-gapped" ')
    text = text.replace("nat_gateways = 1", "nat_gateways = 0").replace("# [eks.mirror]", "[eks.mirror]")
    env.write_text(text.replace('# charts = "', 'charts = "').replace('# images = "', 'images = "'))
    settings = load_settings(deployable_config, "dev-eks")
    clients, _ = aws
    said: list[str] = []
    upload_licence(clients, settings, LICENCE, say=said.append)
    stored = clients.secretsmanager.get_secret_value(SecretId="sonic/dev-eks/cartesia-licence")
    assert base64.b64decode(stored["SecretString"]) == LICENCE
    assert said[0] == "licence stored in the secret sonic/dev-eks/cartesia-licence"
    assert "sends it within 3 minutes" in said[1]


def test_with_both_self_hosted_routes_the_air_gapped_one_gets_the_licence(
    aws: tuple[LicenceClients, Stubber], deployable_config: Path
) -> None:
    """ECS connected beside EKS air-gapped: the upload is EKS's, not refused for ECS's mode."""
    env = deployable_config / "environments/dev-eks.toml"
    text = env.read_text().replace('routes = ["eks"]', 'routes = ["ecs", "eks"]')
    text = text.replace('licence_mode = "connected" ', 'licence_mode = "air-gapped" ')
    text = text.replace("nat_gateways = 1", "nat_gateways = 0").replace("# [eks.mirror]", "[eks.mirror]")
    text = text.replace('# charts = "', 'charts = "').replace('# images = "', 'images = "')
    dev = (deployable_config / "environments/dev.toml").read_text()
    ecs = dev[dev.index("[ecs]") :]
    ecs = ecs.replace('"sonic/dev/', '"sonic/dev-eks/')
    ecs = ecs.replace("\ntls = false\n", "\ntls = false\nallow_plaintext_outside_dev = true\n")
    ecs += '\n[ecs.alarms]\nemail = ["oncall@sonic.test"]\n'
    env.write_text(text + "\n" + ecs)
    settings = load_settings(deployable_config, "dev-eks")
    clients, _ = aws
    said: list[str] = []
    upload_licence(clients, settings, LICENCE, say=said.append)
    assert said[0] == "licence stored in the secret sonic/dev-eks/cartesia-licence"
    assert said[1].startswith("the EKS licence proxy's loader sends it") and len(said) == 2
