"""`sonic-deploy preflight --after-deploy ROUTE` on the command line: its table and exit status, the ECS
route's (no checks yet), and what it refuses before any AWS call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sonic_deploy.cli import main
from sonic_deploy.preflight import AwsClients
from tests.cdk_context import ROOT
from tests.preflight.deployed_aws import ENDPOINT, PREFIX, VARIANT, Aws, alarms, endpoint, identity, stack


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


def test_the_ecs_route_has_no_checks_after_a_deploy_yet(
    wired: Aws, deployable_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    identity(wired)
    assert main(_after_deploy(deployable_config, "dev", "ecs", "--json")) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(c["check"], c["status"]) for c in report["checks"]] == [
        ("credentials and account", "pass"),
        ("ECS checks after a deploy", "skipped"),
    ]


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
