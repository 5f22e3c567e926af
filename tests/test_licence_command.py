"""`sonic-deploy licence upload` against moto: the stack's outputs, the secret, a new proxy deployment."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sonic_deploy.cli import main
from sonic_deploy.config import load_settings
from sonic_deploy.licence.command import (
    MAX_LICENCE_BYTES,
    LicenceClients,
    LicenceError,
    upload_licence,
)

REGION = "us-east-2"
STACK = "sonic-dev-ecs"


def air_gapped(config: Path) -> Path:
    dev = config / "environments/dev.toml"
    text = dev.read_text().replace('licence_mode = "connected"', 'licence_mode = "air-gapped"')
    dev.write_text(text.replace("nat_gateways = 1", "nat_gateways = 0"))
    return config


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[LicenceClients]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        yield LicenceClients(
            cloudformation=boto3.client("cloudformation", region_name=REGION),
            secretsmanager=boto3.client("secretsmanager", region_name=REGION),
            ecs=boto3.client("ecs", region_name=REGION),
        )


def deployed(clients: LicenceClients, *, outputs: bool = True) -> str:
    """What the ECS stack leaves in the account: the secret, the proxy service, and the stack's outputs."""
    secret = clients.secretsmanager.create_secret(
        Name="sonic/dev/cartesia-licence", SecretString="sonic-deploy: no licence uploaded yet"
    )["ARN"]
    clients.ecs.create_cluster(clusterName="sonic-dev")
    clients.ecs.register_task_definition(
        family="licence-proxy",
        containerDefinitions=[{"name": "licence-proxy", "image": "proxy:1", "memory": 512}],
    )
    clients.ecs.create_service(
        cluster="sonic-dev", serviceName="licence-proxy", taskDefinition="licence-proxy", desiredCount=1
    )
    template: dict[str, object] = {
        "Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}
    }
    if outputs:
        template["Outputs"] = {
            "LicenceSecretArn": {"Value": secret},
            "ClusterName": {"Value": "sonic-dev"},
            "LicenceProxyService": {"Value": "licence-proxy"},
        }
    clients.cloudformation.create_stack(StackName=STACK, TemplateBody=json.dumps(template))
    return secret


def rollout(clients: LicenceClients, *states: str) -> Callable[..., Any]:
    """moto leaves a deployment IN_PROGRESS for ever: answer DescribeServices with these rollout states."""
    pending: Iterator[Any] = iter(states)
    real = clients.ecs.describe_services

    def describe(**kwargs: Any) -> Any:
        answer = real(**kwargs)
        state = next(pending)
        for deployment in answer["services"][0]["deployments"]:
            deployment["rolloutState"] = state
            deployment["rolloutStateReason"] = "tasks failed to start"
        return answer

    clients.ecs.describe_services = describe  # type: ignore[method-assign]
    return real


def test_upload_stores_the_licence_and_redeploys_the_proxy(
    aws: LicenceClients, deployable_config: Path
) -> None:
    secret = deployed(aws)
    settings = load_settings(air_gapped(deployable_config), "dev")
    licence = b"\x00licence\xff" * 100
    said: list[str] = []
    slept: list[float] = []
    describe_services = rollout(aws, "IN_PROGRESS", "COMPLETED")
    forced: list[dict[str, Any]] = []
    update_service = aws.ecs.update_service

    def spy(**kwargs: Any) -> Any:  # moto answers; it keeps no record of a forced deployment
        forced.append(kwargs)
        return update_service(**kwargs)

    aws.ecs.update_service = spy  # type: ignore[method-assign]
    upload_licence(aws, settings, licence, say=said.append, sleep=slept.append)
    assert slept == [10]
    stored = aws.secretsmanager.get_secret_value(SecretId=secret)["SecretString"]
    assert base64.b64decode(stored) == licence
    (service,) = describe_services(cluster="sonic-dev", services=["licence-proxy"])["services"]
    assert service["serviceName"] == "licence-proxy"
    assert forced == [{"cluster": "sonic-dev", "service": "licence-proxy", "forceNewDeployment": True}]
    assert said[0] == f"licence stored in {secret}"
    assert said[1].startswith("new deployment of licence-proxy started")
    assert "licence uploaded to the licence proxy" in said[-1]


def test_a_stack_without_the_loader_is_named_with_the_fix(
    aws: LicenceClients, deployable_config: Path
) -> None:
    deployed(aws, outputs=False)
    settings = load_settings(air_gapped(deployable_config), "dev")
    with pytest.raises(
        LicenceError, match="has no output LicenceSecretArn, ClusterName, LicenceProxyService"
    ):
        upload_licence(aws, settings, b"x")


def test_a_missing_stack_says_deploy_first(aws: LicenceClients, deployable_config: Path) -> None:
    settings = load_settings(air_gapped(deployable_config), "dev")
    with pytest.raises(LicenceError, match=r"stack sonic-dev-ecs is not deployed.*make deploy"):
        upload_licence(aws, settings, b"x")


def test_a_failed_deployment_is_reported(aws: LicenceClients, deployable_config: Path) -> None:
    deployed(aws)
    settings = load_settings(air_gapped(deployable_config), "dev")
    rollout(aws, "IN_PROGRESS", "FAILED")
    slept: list[float] = []
    with pytest.raises(LicenceError, match="deployment of licence-proxy failed: tasks failed to start"):
        upload_licence(aws, settings, b"x", say=lambda _: None, sleep=slept.append)
    assert slept == [10]


def test_a_slow_deployment_is_reported(aws: LicenceClients, deployable_config: Path) -> None:
    deployed(aws)
    settings = load_settings(air_gapped(deployable_config), "dev")
    clock = iter([0.0, 100.0, 1000.0])
    rollout(aws, "IN_PROGRESS", "IN_PROGRESS")
    with pytest.raises(LicenceError, match=r"still .* after 900 s"):
        upload_licence(
            aws, settings, b"x", say=lambda _: None, sleep=lambda _: None, clock=lambda: next(clock)
        )


def test_command_line_errors_are_one_line(
    tmp_path: Path, deployable_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def licence(*args: str) -> tuple[int, str]:
        code = main(["licence", "upload", "--env", "dev", "--config-dir", str(deployable_config), *args])
        return code, capsys.readouterr().err

    code, error = licence("--file", str(tmp_path / "missing.lic"))
    assert code == 1 and error.startswith(f"sonic-deploy licence: {tmp_path}/missing.lic: cannot read")
    (tmp_path / "empty.lic").write_bytes(b"")
    assert "the licence file is empty" in licence("--file", str(tmp_path / "empty.lic"))[1]
    (tmp_path / "huge.lic").write_bytes(b"x" * (MAX_LICENCE_BYTES + 1))
    assert "more than a secret holds" in licence("--file", str(tmp_path / "huge.lic"))[1]
    (tmp_path / "ok.lic").write_bytes(b"licence")
    code, error = licence("--file", str(tmp_path / "ok.lic"))  # dev is connected
    assert code == 1 and 'licence_mode = "connected"' in error and "Traceback" not in error
