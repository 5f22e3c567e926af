"""run_preflight's order and skips, and `sonic-deploy preflight` output and exit status."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from sonic_deploy.cli import main
from sonic_deploy.config import Settings
from sonic_deploy.preflight import AwsClients, run_preflight
from tests.cdk_context import ROOT
from tests.preflight.conftest import ECS, FakeAws, bootstrap_template, push_image, with_account


def ready_account(fake_aws: FakeAws) -> None:
    fake_aws.stub_sagemaker_package()
    fake_aws.stub_endpoint_quota("ml.g6e.xlarge for endpoint usage", 8.0)
    fake_aws.stub_other_endpoints()
    fake_aws.clients.cloudformation.create_stack(
        StackName="CDKToolkit", TemplateBody=bootstrap_template("28")
    )


@pytest.fixture
def test_targets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ECS route's checks read the test's targets (images and secrets it made), not the config's."""
    monkeypatch.setattr("sonic_deploy.routes.ecs.preflight.ecs_targets", lambda settings: ECS)


@pytest.mark.usefixtures("test_targets")
def test_everything_in_order_for_both_routes(fake_aws: FakeAws, settings: Settings) -> None:
    ready_account(fake_aws)
    fake_aws.stub_vcpu_quota(32.0)
    for repository, tag in ECS.images:
        push_image(fake_aws.clients, repository, tag)
    fake_aws.clients.secretsmanager.create_secret(Name="sonic/cartesia-api-key", SecretString="k")
    results = run_preflight(fake_aws.clients, settings)
    assert [(r.check, r.status) for r in results] == [
        ("credentials and account", "pass"),
        ("model package subscription", "pass"),
        ("quota: ml.g6e.xlarge for endpoint usage", "pass"),
        ("g6e.xlarge hardware in the endpoint's AZs", "pass"),
        ("log group /aws/sagemaker/Endpoints/sonic-dev", "pass"),
        ("quota: Running On-Demand G and VT instances", "pass"),
        ("g6e.xlarge offered in us-east-2a", "pass"),
        ("GPU AMI al2023-ami-ecs-gpu-hvm-2023.0.20260820-kernel-6.1-x86_64-ebs", "pass"),
        ("capacity reservations in us-east-2a", "pass"),
        ("image sonic-api:1.2.3", "pass"),
        ("image sonic-worker:1.2.3", "pass"),
        ("secret sonic/cartesia-api-key", "pass"),
        ("EKS checks", "skipped"),  # not in dev's routes
        ("CDK bootstrap", "pass"),
        ("quota: Inbound or outbound rules per security group", "pass"),
    ]


def test_wrong_account_skips_everything_else(fake_aws: FakeAws, settings: Settings) -> None:
    results = run_preflight(fake_aws.clients, with_account(settings, "210987654321"))
    assert [r.status for r in results] == ["fail", "skipped"]
    assert results[1].detail == "they need working credentials for the right account"


def test_routes_decide_which_checks_run(fake_aws: FakeAws, settings: Settings) -> None:
    fake_aws.clients.cloudformation.create_stack(
        StackName="CDKToolkit", TemplateBody=bootstrap_template("28")
    )
    ecs_only = dataclasses.replace(
        settings,
        environment=settings.environment.model_copy(update={"routes": ["ecs"]}),
        model_package_arn=None,
    )
    fake_aws.stub_vcpu_quota(32.0)
    results = run_preflight(fake_aws.clients, ecs_only)  # ECS targets from the settings
    assert (results[1].check, results[1].status) == ("SageMaker checks", "skipped")
    assert results[2].check == "quota: Running On-Demand G and VT instances"
    assert ("ECR images", "skipped") in [(r.check, r.status) for r in results]


def test_sagemaker_only_environment_skips_ecs(fake_aws: FakeAws, settings: Settings) -> None:
    sagemaker_only = dataclasses.replace(
        settings, environment=settings.environment.model_copy(update={"routes": ["sagemaker"]})
    )
    ready_account(fake_aws)
    results = run_preflight(fake_aws.clients, sagemaker_only)
    assert ("ECS checks", "skipped", "route not in dev's routes") in [
        (r.check, r.status, r.detail) for r in results
    ]


@pytest.fixture
def wired(fake_aws: FakeAws, monkeypatch: pytest.MonkeyPatch) -> FakeAws:
    monkeypatch.setattr(
        AwsClients, "from_session", classmethod(lambda cls, session, region: fake_aws.clients)
    )
    return fake_aws


@pytest.fixture
def preflight(deployable_config: Path) -> Callable[..., int]:
    def run(*args: str) -> int:
        return main(["preflight", "--env", "dev", "--config-dir", str(deployable_config), *args])

    return run


def test_placeholders_are_refused_before_any_aws_call(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_aws(*args: object, **kwargs: object) -> None:
        raise AssertionError("preflight called AWS with placeholders in config")

    monkeypatch.setattr("boto3.Session", no_aws)
    assert main(["preflight", "--env", "dev", "--config-dir", str(ROOT / "config")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(
        "sonic-deploy preflight: environment dev still has 11 placeholder(s) to replace before a deploy:\n"
    )
    assert f"  {ROOT}/config/environments/dev.toml: ecs.services.api_server.source = " in error
    assert "remove it from `unconfirmed`" in error and "Traceback" not in error


def test_command_exits_0_when_nothing_fails(
    wired: FakeAws, capsys: pytest.CaptureFixture[str], preflight: Callable[..., int]
) -> None:
    ready_account(wired)
    wired.stub_vcpu_quota(64.0)
    for name in ("sonic/dev/cartesia-api-key", "sonic/dev/cartesia-registry"):
        wired.clients.secretsmanager.create_secret(Name=name, SecretString="x")
    assert preflight() == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Preflight for dev in us-east-2:"
    assert out[1].startswith("  PASS  credentials and account: account 123456789012")
    assert "  SKIP  ECR images: copy_images = true: the deploy copies them from Cartesia's registry" in out
    assert "  PASS  secret sonic/dev/cartesia-registry: exists" in out
    assert out[-1] == "All checks passed or were skipped."


def test_command_exits_1_with_json_for_ci(
    wired: FakeAws, capsys: pytest.CaptureFixture[str], preflight: Callable[..., int]
) -> None:
    wired.stub_sagemaker_error("ValidationException", "Caller is not subscribed to the marketplace offering.")
    wired.stub_endpoint_quota("ml.g6e.xlarge for endpoint usage", 8.0)
    wired.stub_other_endpoints()
    wired.stub_vcpu_quota(64.0)
    assert preflight("--json") == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["environment"], report["region"], report["ok"]) == ("dev", "us-east-2", False)
    by_check = {check["check"]: check for check in report["checks"]}
    assert by_check["model package subscription"]["status"] == "fail"
    assert by_check["model package subscription"]["fix"].startswith("subscribe to the Cartesia Sonic listing")
    assert by_check["CDK bootstrap"]["status"] == "fail"  # moto's account has no CDKToolkit stack
    assert set(by_check["CDK bootstrap"]) == {"check", "status", "detail", "fix"}


def test_unknown_environment_is_a_config_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["preflight", "--env", "staging", "--config-dir", str(ROOT / "config")]) == 2
    assert (
        "env = 'staging': unknown environment. Fix: use one of dev, dev-eks, prod" in capsys.readouterr().err
    )


def test_the_operator_commands_never_import_aws_cdk() -> None:
    """One interpreter for every command that must run without the CDK (planner, preflight, changes, connect,
    mirror)."""
    import subprocess
    import sys

    code = (
        "import sys, sonic_deploy.cli, sonic_deploy.planner.price_refresh, sonic_deploy.planner.chart;"
        "import sonic_deploy.preflight.runner, sonic_deploy.changes.cli, sonic_deploy.connect.command;"
        "import sonic_deploy.mirror.command; print('aws_cdk' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_unknown_profile_is_reported_without_a_traceback(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    preflight: Callable[..., int],
) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    assert preflight("--profile", "nosuch") == 1
    error = capsys.readouterr().err
    assert error.startswith(
        "sonic-deploy preflight: cannot talk to AWS: The config profile (nosuch) could not be"
    )
    assert "Fix: check --profile" in error and "Traceback" not in error
