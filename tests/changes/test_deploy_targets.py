"""The make targets of mk/deploy.mk, run for real with a stand-in CDK CLI (no Node, no AWS):
`make diff` catches an endpoint replacement offline, `make baseline` refreshes, deploy/destroy check ENV
and ROUTE, pick the stack, and explain a missing bootstrap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sonic_deploy.config import environment_names
from tests.changes.narrow_config import SAGEMAKER_ONLY, config_with_sagemaker_only_environment
from tests.conftest import DEPLOYABLE_ACCOUNT, replace_placeholders

REPO = Path(__file__).resolve().parents[2]
BOOTSTRAP_ERROR = (
    "SonicSageMaker: SSM parameter /cdk-bootstrap/hnb659fds/version not found. Has the environment been "
    "bootstrapped? Please run 'cdk bootstrap' (see https://docs.aws.amazon.com/cdk/latest/guide/bootstrapping.html)"
)

# Stands in for `node node_modules/aws-cdk/bin/cdk`: `synth --output DIR` writes $FAKE_TEMPLATE as the
# SonicSageMaker template; any other command prints $FAKE_CDK_SAYS and exits with $FAKE_CDK_EXIT.
FAKE_CDK = """\
import os, shutil, sys
from pathlib import Path
args = sys.argv[1:]
with open(os.environ["FAKE_CDK_CALLS"], "a") as calls:
    calls.write(" ".join(args) + "\\n")
if args[0] == "synth":
    out = Path(args[args.index("--output") + 1])
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(os.environ["FAKE_TEMPLATE"], out / "SonicSageMaker.template.json")
    sys.exit(0)
print(os.environ.get("FAKE_CDK_SAYS", ""))
sys.exit(int(os.environ.get("FAKE_CDK_EXIT", "0")))
"""


def endpoint_stack(endpoint_name: str) -> dict[str, Any]:
    properties = {"EndpointName": endpoint_name, "EndpointConfigName": "cfg"}
    return {"Resources": {"Endpoint": {"Type": "AWS::SageMaker::Endpoint", "Properties": properties}}}


class Make:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.calls = tmp_path / "calls.txt"
        self.config = replace_placeholders(config_with_sagemaker_only_environment(tmp_path))
        self.template = tmp_path / "synthesized.json"
        script = tmp_path / "fake_cdk.py"
        script.write_text(FAKE_CDK, encoding="utf-8")
        self.cdk = f"{sys.executable} {script}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MAKE"))}
        self.env |= {
            "FAKE_CDK_CALLS": str(self.calls),
            "FAKE_TEMPLATE": str(self.template),
            # No credentials anywhere: nothing here may reach AWS.
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-credentials"),
            "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
        }

    def synthesizes(self, template: dict[str, Any]) -> None:
        self.template.write_text(json.dumps(template), encoding="utf-8")

    def __call__(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        command = [
            "make", "--no-print-directory", *args, f"CDK={self.cdk}", "DEPLOY_SETUP=",
            f"BASELINES={self.tmp / 'baselines'}", f"SYNTH_DIR={self.tmp / 'synth'}", f"CONFIG={self.config}",
        ]  # fmt: skip
        return subprocess.run(
            command, cwd=REPO, env=self.env | env, capture_output=True, text=True, timeout=120, check=False
        )


@pytest.fixture
def make(tmp_path: Path) -> Make:
    return Make(tmp_path)


def test_make_diff_catches_endpoint_replacement_offline(make: Make) -> None:
    make.synthesizes(endpoint_stack("sonic-dev"))
    assert make("baseline", "ENV=dev").returncode == 0
    assert (make.tmp / "baselines/dev/SonicSageMaker.template.json").is_file()
    assert make("diff", "ENV=dev").returncode == 0

    make.synthesizes(endpoint_stack("sonic-dev-2"))
    result = make("diff", "ENV=dev", f"SUMMARY={make.tmp / 'summary.md'}")
    assert result.returncode != 0
    assert "!!replaced Endpoint" in result.stdout and "DANGEROUS" in result.stdout
    assert ":no_entry:" in (make.tmp / "summary.md").read_text(encoding="utf-8")
    assert make("diff", "ENV=dev", "ALLOW_DANGEROUS=1").returncode == 0
    assert make("diff", "ENV=dev", "ALLOW_DANGEROUS=0").returncode != 0
    assert "synth --quiet -c env=dev --output" in make.calls.read_text(encoding="utf-8")


def test_cdk_diff_compares_with_the_baseline_and_writes_the_summary(make: Make) -> None:
    make.synthesizes(endpoint_stack("sonic-dev"))
    assert make("baseline", "ENV=dev").returncode == 0
    summary = make.tmp / "summary.md"
    result = make("cdk-diff", "ENV=dev", f"SUMMARY={summary}", FAKE_CDK_SAYS="[~] AWS::SageMaker::Endpoint")
    assert result.returncode == 0
    baseline = make.tmp / "baselines/dev/SonicSageMaker.template.json"
    diff_call = make.calls.read_text().splitlines()[-1]
    assert diff_call == (
        f"diff --no-color --app {make.tmp / 'synth/dev'} --exclusively SonicSageMaker --template {baseline}"
    )
    assert "<details><summary>cdk diff dev/SonicSageMaker</summary>" in summary.read_text()
    assert "[~] AWS::SageMaker::Endpoint" in summary.read_text()


def test_cdk_diff_live_compares_with_the_account(make: Make) -> None:
    make.synthesizes(endpoint_stack("sonic-dev"))
    assert make("diff", "ENV=dev").returncode == 0
    assert make("cdk-diff", "ENV=dev", "LIVE=1", "ROUTE=sagemaker").returncode == 0
    assert make.calls.read_text().splitlines()[-1].endswith("--exclusively SonicSageMaker")


def test_make_diff_without_env_covers_every_environment(make: Make) -> None:
    make.synthesizes(endpoint_stack("sonic-dev"))
    make("diff")
    synthesized = [line.split("env=")[1].split()[0] for line in make.calls.read_text().splitlines()]
    assert synthesized == environment_names(make.config)


def test_make_diff_rejects_an_unknown_env_before_synthesizing(make: Make) -> None:
    result = make("diff", "ENV=staging")
    assert result.returncode != 0
    assert f"ENV=staging is not an environment: use one of {', '.join(environment_names(make.config))}" in (
        result.stderr
    )
    assert not make.calls.exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("deploy",), "ENV is not set"),
        (("deploy", "ENV=dev"), "ROUTE is not set"),
        (("destroy", "ENV=dev", "ROUTE=gpu"), "ROUTE=gpu is not a route: use one of sagemaker, ecs"),
        (
            ("deploy", f"ENV={SAGEMAKER_ONLY}", "ROUTE=ecs"),
            f"environment {SAGEMAKER_ONLY} does not deploy the ecs",
        ),
    ],
)
def test_deploy_and_destroy_check_env_and_route(make: Make, args: tuple[str, ...], expected: str) -> None:
    result = make(*args)
    assert result.returncode != 0
    assert expected in result.stderr and "Traceback" not in result.stderr
    assert not make.calls.exists()


def test_deploy_runs_cdk_for_the_routes_stack(make: Make) -> None:
    assert make("deploy", "ENV=dev", "ROUTE=sagemaker", "APPROVAL=never").returncode == 0
    assert make.calls.read_text() == "deploy SonicSageMaker -c env=dev --require-approval never\n"


def test_deploy_refuses_placeholders_before_any_cdk_call(tmp_path: Path) -> None:
    """The shipped config: an unconfirmed ARN for dev's SageMaker route, REPLACE-ME images for its ECS route."""
    make = Make(tmp_path)
    make.config = config_with_sagemaker_only_environment(tmp_path / "shipped")
    sagemaker = make("deploy", "ENV=dev", "ROUTE=sagemaker", "APPROVAL=never")
    assert sagemaker.returncode == 2 and "Traceback" not in sagemaker.stderr
    assert "1 placeholder(s) to replace before a deploy" in sagemaker.stderr
    assert f'{make.config}/model_packages.toml: versions."sonic-3"."us-east-2" = ' in sagemaker.stderr
    assert "remove it from `unconfirmed`" in sagemaker.stderr
    ecs = make("deploy", "ENV=dev", "ROUTE=ecs")
    assert ecs.returncode == 2
    assert (
        f"{make.config}/environments/dev.toml: ecs.services.gpu_worker.tag = 'REPLACE-ME': still the shipped "
        "placeholder. Fix: write the image tag from Cartesia's deployment bundle"
    ) in ecs.stderr
    assert "versions." not in ecs.stderr  # only the route being deployed
    prod = make("deploy", "ENV=prod", "ROUTE=sagemaker")
    assert "account = '123456789012': AWS's documentation example account" in prod.stderr
    assert "sagemaker.alarms.email = 'oncall@example.com': an example address" in prod.stderr
    assert not make.calls.exists()
    # Destroying is never refused: a stack deployed before the check must still go.
    assert make("destroy", "ENV=dev", "ROUTE=ecs", "FORCE=1").returncode == 0


def test_destroy_names_what_is_retained(make: Make) -> None:
    result = make("destroy", "ENV=dev", "ROUTE=sagemaker", "FORCE=1")
    assert result.returncode == 0
    assert make.calls.read_text() == "destroy SonicSageMaker -c env=dev --force\n"
    assert "ECR repositories, KMS keys, log groups" in result.stdout


def test_missing_bootstrap_is_explained(make: Make) -> None:
    result = make("deploy", "ENV=prod", "ROUTE=sagemaker", FAKE_CDK_SAYS=BOOTSTRAP_ERROR, FAKE_CDK_EXIT="1")
    assert result.returncode != 0
    assert f"The CDK is not bootstrapped in aws://{DEPLOYABLE_ACCOUNT}/us-east-2" in result.stderr
    assert (
        f"make bootstrap ENV=prod      # runs cdk bootstrap aws://{DEPLOYABLE_ACCOUNT}/us-east-2"
        in result.stderr
    )


def test_missing_bootstrap_without_an_account_explains_the_placeholder(make: Make) -> None:
    result = make("deploy", "ENV=dev", "ROUTE=sagemaker", FAKE_CDK_SAYS=BOOTSTRAP_ERROR, FAKE_CDK_EXIT="1")
    assert "cdk bootstrap aws://ACCOUNT/us-east-2" in result.stderr
    assert "aws sts get-caller-identity" in result.stderr


def test_missing_credentials_are_explained(make: Make) -> None:
    said = "Unable to resolve AWS account to use. It must be either configured when you define your CDK Stack"
    result = make("destroy", "ENV=dev", "ROUTE=sagemaker", FAKE_CDK_SAYS=said, FAKE_CDK_EXIT="1")
    assert result.returncode != 0
    assert "The CDK found no AWS credentials" in result.stderr and "aws sso login" in result.stderr


def test_other_deploy_failures_are_passed_through(make: Make) -> None:
    result = make(
        "deploy", "ENV=dev", "ROUTE=sagemaker", FAKE_CDK_SAYS="ValidationError: boom", FAKE_CDK_EXIT="1"
    )
    assert result.returncode != 0
    assert "ValidationError: boom" in result.stdout
    assert "bootstrap" not in result.stderr


SCOPED_POLICY = f"arn:aws:iam::{DEPLOYABLE_ACCOUNT}:policy/sonic-deploy-cloudformation-execution"


def test_bootstrap_uses_the_configured_account_and_the_scoped_execution_policy(make: Make) -> None:
    """EXECUTION_POLICY stands in for the IAM step here (tests/changes/test_execution_policy_apply.py runs
    that step against moto): CloudFormation's execution role gets it, not AdministratorAccess."""
    result = make("bootstrap", "ENV=prod", f"EXECUTION_POLICY={SCOPED_POLICY}")
    assert result.returncode == 0, result.stderr
    assert make.calls.read_text() == (
        f"bootstrap aws://{DEPLOYABLE_ACCOUNT}/us-east-2 --cloudformation-execution-policies {SCOPED_POLICY} "
        "-c env=prod\n"
    )


def test_bootstrap_creates_the_policy_before_cdk_and_stops_without_credentials(make: Make) -> None:
    result = make("bootstrap", "ENV=prod", f"PY={sys.executable}")
    assert result.returncode == 2
    assert f"error: creating IAM policy {SCOPED_POLICY} needs AWS credentials and found none" in result.stderr
    assert "Traceback" not in result.stderr
    assert not make.calls.exists()


def test_bootstrap_reads_the_policy_file_it_is_given(make: Make, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-policy.json"
    result = make("bootstrap", "ENV=prod", f"PY={sys.executable}", f"EXECUTION_POLICY_FILE={missing}")
    assert result.returncode == 2 and f"error: {missing}: no such policy file" in result.stderr
    assert not make.calls.exists()


def test_bootstrap_without_account_or_credentials_says_how_to_sign_in(make: Make) -> None:
    result = make("bootstrap", "ENV=dev")
    assert result.returncode != 0
    assert "no AWS account" in result.stderr and "aws sso login" in result.stderr


def test_make_licence_needs_env_and_file_and_reaches_the_command(make: Make, tmp_path: Path) -> None:
    missing = make("licence", "ENV=dev")
    assert missing.returncode == 2 and "give ENV=<environment> FILE=<licence file>" in missing.stderr
    (tmp_path / "l.lic").write_bytes(b"licence")
    connected = make("licence", "ENV=dev", f"FILE={tmp_path / 'l.lic'}", "PY=" + sys.executable)
    assert connected.returncode != 0
    assert 'licence_mode = "connected"' in connected.stderr and "Traceback" not in connected.stderr
