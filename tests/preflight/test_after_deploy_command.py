"""`sonic-deploy preflight --after-deploy ROUTE` on the command line: its table and exit status, the ECS
route's services, and what it refuses before any AWS call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sonic_deploy.cli import main
from sonic_deploy.preflight import AwsClients
from tests.cdk_context import ROOT
from tests.preflight.deployed_aws import (
    ENDPOINT,
    PREFIX,
    VARIANT,
    WHEN,
    Aws,
    alarms,
    endpoint,
    identity,
    stack,
)


@pytest.fixture
def wired(aws: Aws, monkeypatch: pytest.MonkeyPatch) -> Aws:
    monkeypatch.setattr(AwsClients, "from_session", classmethod(lambda cls, session, region: aws.clients))
    return aws


def _after_deploy(config: Path, env: str, route: str, *options: str) -> list[str]:
    return ["preflight", "--env", env, "--config-dir", str(config), "--after-deploy", route, *options]


def test_the_command_prints_the_checks_and_exits_1_on_a_failure(
    wired: Aws, deployable_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    identity(wired)
    stack(wired)
    endpoint(wired)
    alarms(wired)  # none: a failure
    assert main(_after_deploy(deployable_config, "dev", "sagemaker")) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Preflight for dev in us-east-2:"
    assert f"  PASS  endpoint {ENDPOINT}: InService: variant {VARIANT}, 2 instance(s)" in out
    assert (
        f"  FAIL  target-tracking alarms of endpoint/{ENDPOINT}/variant/{VARIANT}: no alarm named {PREFIX}*: the stack's scaling policies made none"
        in out
    )
    assert out[-1] == "1 check(s) failed."


ECS_STACK, CLUSTER = "sonic-dev-ecs", "sonic-dev-ClusterEB0386A7-0a1b2c3d"


def _ecs_stack(aws: Aws) -> None:
    outputs = {
        "ApiUrl": "ws://internal-sonic.elb.us-east-2.amazonaws.com:80/tts/websocket",
        "ModelId": "sonic-3",
        "CartesiaVersion": "2025-04-16",
        "ApiKeySecret": "sonic/dev/cartesia-api-key",
        "Region": "us-east-2",
        "ClusterName": CLUSTER,
    }
    described = {
        "StackName": ECS_STACK,
        "CreationTime": WHEN,
        "StackStatus": "UPDATE_COMPLETE",
        "Outputs": [{"OutputKey": key, "OutputValue": value} for key, value in outputs.items()],
    }
    aws.answer("cloudformation", "describe_stacks", {"Stacks": [described]}, {"StackName": ECS_STACK})


def _service(name: str, running: int, desired: int, rollout: str = "COMPLETED") -> dict[str, object]:
    arn = f"arn:aws:ecs:us-east-2:123456789012:service/{CLUSTER}/{name}"
    deployment = {
        "id": f"ecs-svc/{name}",
        "status": "PRIMARY",
        "rolloutState": rollout,
        "runningCount": running,
    }
    return {
        "serviceArn": arn,
        "serviceName": name,
        "status": "ACTIVE",
        "desiredCount": desired,
        "runningCount": running,
        "deployments": [deployment],
    }


def test_the_ecs_route_checks_its_stack_and_each_service(
    wired: Aws, deployable_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    identity(wired)
    _ecs_stack(wired)
    services = [
        _service("ApiServer", 2, 2),
        _service("GpuWorkers", 1, 2),
        _service("Nats", 3, 3, "IN_PROGRESS"),
    ]
    wired.answer(
        "ecs", "list_services", {"serviceArns": [s["serviceArn"] for s in services]}, {"cluster": CLUSTER}
    )
    wired.answer(
        "ecs",
        "describe_services",
        {"services": services, "failures": []},
        {"cluster": CLUSTER, "services": [s["serviceArn"] for s in services]},
    )
    assert main(_after_deploy(deployable_config, "dev", "ecs", "--json")) == 1
    report = json.loads(capsys.readouterr().out)
    assert [(c["check"], c["status"], c["detail"]) for c in report["checks"]] == [
        ("credentials and account", "pass", report["checks"][0]["detail"]),
        (
            f"stack {ECS_STACK}",
            "pass",
            f"UPDATE_COMPLETE: cluster {CLUSTER}, API ws://internal-sonic.elb.us-east-2.amazonaws.com:80/tts/websocket",
        ),
        ("service ApiServer", "pass", "2 of 2 tasks running"),
        ("service GpuWorkers", "fail", "1 of 2 tasks running"),
        ("service Nats", "skipped", "rolling out (3 of 3 tasks running): run this again once it ends"),
    ]
    assert (
        "aws ecs describe-services --cluster " + CLUSTER + " --services GpuWorkers"
        in report["checks"][3]["fix"]
    )


def test_a_route_the_environment_does_not_deploy_is_refused_before_any_aws_call(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_aws(*args: object, **kwargs: object) -> None:
        raise AssertionError("preflight called AWS for a route the environment does not deploy")

    monkeypatch.setattr("boto3.Session", no_aws)
    config = ROOT / "config"
    assert main(_after_deploy(config, "prod", "ecs")) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "sonic-deploy preflight: --after-deploy ecs: environment prod does not deploy that route (routes = "
        f'["sagemaker"] in {config}/environments/prod.toml). Fix: pass --after-deploy sagemaker'
    )


def test_before_and_after_deploy_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["preflight", "--env", "dev", "--before-deploy", "ecs", "--after-deploy", "ecs"])
    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("sonic-deploy preflight: --after-deploy not allowed with argument --before-deploy")
    assert "Fix: " in line
