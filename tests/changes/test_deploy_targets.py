"""The make targets of mk/deploy.mk, run for real with a stand-in CDK CLI (no Node, no AWS):
`make diff` catches an endpoint replacement offline, `make baseline` refreshes, deploy/destroy check ENV
and ROUTE, pick the stack, and explain a missing bootstrap."""

from __future__ import annotations

import json
import os
import signal
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

# Stands in for `node node_modules/aws-cdk/bin/cdk`. `synth --output DIR` acts as the app does: it writes
# $FAKE_TEMPLATE as the SonicSageMaker template with a manifest and the stamp of `-c config=`, or fails like
# the CLI after an app's config error ($FAKE_SYNTH_FAILS=config: the app's line, the CLI's line, exit 1) or
# another failure (=crash), or takes the CLI's write lock and waits to be interrupted (=hang). Any other
# command prints $FAKE_CDK_SAYS and exits with $FAKE_CDK_EXIT.
FAKE_CDK = """\
import os, shutil, signal, sys, time
from pathlib import Path
args = sys.argv[1:]
with open(os.environ["FAKE_CDK_CALLS"], "a") as calls:
    calls.write(" ".join(args) + "\\n")
if args[0] == "synth":
    out = Path(args[args.index("--output") + 1])
    out.mkdir(parents=True, exist_ok=True)
    context = dict(args[i + 1].split("=", 1) for i, arg in enumerate(args) if arg == "-c")
    fails = os.environ.get("FAKE_SYNTH_FAILS")
    if fails == "config":
        print("sonic-deploy: config/environments/dev.toml: region = 'mars-1': bad. Fix: use us-east-2", file=sys.stderr)
        print(".venv/bin/python app.py: Subprocess exited with error 2", file=sys.stderr)
        sys.exit(1)
    if fails == "crash":
        print(".venv/bin/python app.py: Subprocess exited with error 1", file=sys.stderr)
        sys.exit(1)
    if fails == "hang":
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # Node's default: SIGINT ends it, without a word
        (out / "synth.lock").write_text(str(os.getpid()))
        print("waiting", file=sys.stderr, flush=True)
        time.sleep(120)
        sys.exit(1)
    from sonic_deploy.changes.assembly import write_stamp
    shutil.copyfile(os.environ["FAKE_TEMPLATE"], out / "SonicSageMaker.template.json")
    (out / "manifest.json").write_text("{}")
    write_stamp(out, environment=context.get("env", "dev"), config_dir=Path(context["config"]), stacks=["SonicSageMaker"])
    sys.exit(0)
print(os.environ.get("FAKE_CDK_SAYS", ""))
sys.exit(int(os.environ.get("FAKE_CDK_EXIT", "0")))
"""


# Stands in for Docker (`CDK_DOCKER`): `info` answers as a running daemon, or fails as a stopped one when
# $FAKE_DOCKER_DOWN is set.
FAKE_DOCKER = """\
import os, sys
if os.environ.get("FAKE_DOCKER_DOWN"):
    print("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?", file=sys.stderr)
    sys.exit(1)
print("27.3.1")
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
        docker = tmp_path / "fake_docker.py"
        docker.write_text(FAKE_DOCKER, encoding="utf-8")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MAKE"))}
        self.env |= {
            "FAKE_CDK_CALLS": str(self.calls),
            "FAKE_TEMPLATE": str(self.template),
            "CDK_DOCKER": f"{sys.executable} {docker}",
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
    assert f"synth --quiet --no-notices -c env=dev -c config={make.config} --output" in make.calls.read_text()


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
    # One route's stack, by the registry's stack id: absent from this environment, or not a route at all.
    absent = make("cdk-diff", "ENV=dev", "ROUTE=ecs")
    assert absent.returncode == 0 and "environment dev synthesizes no ecs stack" in absent.stdout
    unknown = make("cdk-diff", "ENV=dev", "ROUTE=gpu")
    assert (
        unknown.returncode != 0
        and "--route invalid choice: 'gpu' (choose from 'ecs', 'eks', 'sagemaker')" in unknown.stderr
    )


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
    assert (
        "ecs.services.api_server.nats_url_variable = 'REPLACE-ME_NATS_URL': still the shipped placeholder: "
        "the image would not be told where NATS is"
    ) in ecs.stderr
    assert "versions." not in ecs.stderr  # only the route being deployed
    prod = make("deploy", "ENV=prod", "ROUTE=sagemaker")
    assert "account = '123456789012': AWS's documentation example account" in prod.stderr
    assert "sagemaker.alarms.email = 'oncall@example.com': an example address" in prod.stderr
    assert not make.calls.exists()
    # Destroying is never refused: a stack deployed before the check must still go.
    assert make("destroy", "ENV=dev", "ROUTE=ecs", "FORCE=1").returncode == 0


def test_each_placeholder_is_an_error_line_of_its_own(tmp_path: Path) -> None:
    make = Make(tmp_path)
    make.config = config_with_sagemaker_only_environment(tmp_path / "shipped")
    lines = make("deploy", "ENV=dev", "ROUTE=ecs").stderr.splitlines()
    refused = [line for line in lines if line.startswith("error: ")]
    assert refused[0] == "error: environment dev still has 10 placeholder(s) to replace before a deploy:"
    assert len(refused) == 11 and "\\n" not in "".join(refused)
    assert all(f"error: {make.config}/environments/dev.toml: ecs.services." in line for line in refused[1:])


def test_deploy_stops_before_the_cdk_when_docker_is_down(make: Make) -> None:
    """cdk deploy builds the probe image: without a running Docker it would fail after the synth."""
    result = make("deploy", "ENV=dev", "ROUTE=sagemaker", FAKE_DOCKER_DOWN="1")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "FAIL  Docker (cdk deploy builds the probe image): `" in result.stdout
    assert "info` failed: Cannot connect to the Docker daemon" in result.stdout
    assert "make deploy: stopped before the CDK ran" in result.stderr
    assert not make.calls.exists()


def test_deploy_of_ecs_checks_its_secrets_before_the_cdk(make: Make) -> None:
    """The ECS secrets need AWS: with no credentials the check cannot pass, and nothing is deployed."""
    result = make("deploy", "ENV=dev", "ROUTE=ecs")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "sonic-deploy preflight: cannot talk to AWS" in result.stderr
    assert not make.calls.exists()


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


def test_bootstrap_creates_the_boundary_first_and_stops_without_credentials(make: Make) -> None:
    result = make("bootstrap", "ENV=prod", f"PY={sys.executable}")
    assert result.returncode == 2
    boundary = f"arn:aws:iam::{DEPLOYABLE_ACCOUNT}:policy/sonic-deploy-permissions-boundary"
    assert f"error: creating IAM policy {boundary} needs AWS credentials and found none" in result.stderr
    assert "Traceback" not in result.stderr
    assert not make.calls.exists()


def test_bootstrap_reads_the_policy_file_it_is_given(make: Make, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-policy.json"
    result = make("bootstrap", "ENV=prod", f"PY={sys.executable}", f"EXECUTION_POLICY_FILE={missing}")
    assert result.returncode == 2
    assert f"--document '{missing}': cannot read it" in result.stderr
    assert "Fix: give the path of an IAM policy document" in result.stderr
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


# Nothing half-written (issue 16): a failed synth leaves no assembly, and nothing reads an earlier one.


def _assembly_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def _lines(stderr: str) -> list[str]:
    """What the user reads, without make's own `make: *** [...] Error 2` trailer (make exits 2 whenever a
    recipe fails; the recipe's status is in that trailer)."""
    return [line for line in stderr.splitlines() if not line.startswith("make: ***")]


def test_a_config_error_in_make_diff_is_one_line_and_leaves_nothing_for_cdk_diff(make: Make) -> None:
    make.synthesizes(endpoint_stack("sonic-dev"))
    assert make("baseline", "ENV=dev").returncode == 0
    assert (make.tmp / "synth/dev/manifest.json").is_file()

    result = make("diff", "ENV=dev", FAKE_SYNTH_FAILS="config")

    assert result.returncode == 2 and "synth-envs] Error 2" in result.stderr
    assert _lines(result.stderr) == [
        "sonic-deploy: config/environments/dev.toml: region = 'mars-1': bad. Fix: use us-east-2"
    ]
    assert _assembly_files(make.tmp / "synth/dev") == []  # the earlier synth is gone, not left to be read
    assert "No dangerous changes" not in result.stdout
    calls = make.calls.read_text()

    cdk_diff = make("cdk-diff", "ENV=dev", f"SUMMARY={make.tmp / 'summary.md'}")

    assert cdk_diff.returncode == 2
    assert "no synthesized sonic stacks in" in cdk_diff.stderr and "make diff ENV=dev" in cdk_diff.stderr
    assert make.calls.read_text() == calls  # cdk diff never ran on anything
    assert not (make.tmp / "summary.md").exists()


def test_make_diff_when_synth_fails_otherwise_exits_1_and_leaves_no_assembly(make: Make) -> None:
    make.synthesizes(endpoint_stack("sonic-dev"))
    assert make("diff", "ENV=dev").returncode == 0
    result = make("diff", "ENV=dev", FAKE_SYNTH_FAILS="crash")
    assert result.returncode == 2  # make's status for any failed recipe; the recipe's own is 1
    assert "synth-envs] Error 1" in result.stderr
    assert "Subprocess exited with error 1" in result.stderr  # the CDK's own report stays
    assert _assembly_files(make.tmp / "synth/dev") == []


def test_cdk_diff_refuses_an_assembly_from_an_earlier_config(make: Make) -> None:
    make.synthesizes(endpoint_stack("sonic-dev"))
    assert make("diff", "ENV=dev").returncode == 0
    dev = make.config / "environments/dev.toml"
    dev.write_text(dev.read_text(encoding="utf-8") + "\n# changed after the synth\n", encoding="utf-8")

    result = make("cdk-diff", "ENV=dev", "LIVE=1")

    assert result.returncode == 2
    assert "the assembly was synthesized from another config than" in result.stderr
    assert not any(line.startswith("diff ") for line in make.calls.read_text().splitlines())


def test_make_synth_publishes_a_stamped_assembly_or_none(make: Make) -> None:
    out = make.tmp / "cdk.out"
    (out / "by-env").mkdir(parents=True)  # make diff's folders live inside cdk.out: they stay
    skip_setup = ["-o", ".venv/.installed", "-o", "node_modules/.installed", f"SYNTH_OUT={out}"]
    make.synthesizes(endpoint_stack("sonic-dev"))
    (out / "SonicEcs.template.json").write_text("{}")  # a stack an earlier synth wrote
    (out / "synth.lock").write_text("999999999")  # an interrupted plain `cdk synth`'s, its PID long gone

    assert make(*skip_setup, "synth").returncode == 0
    assert _assembly_files(out) == [
        "SonicSageMaker.template.json",
        "by-env",
        "manifest.json",
        "sonic-synth.json",
    ]

    result = make(*skip_setup, "synth", FAKE_SYNTH_FAILS="config")
    assert result.returncode == 2 and len(_lines(result.stderr)) == 1
    assert _assembly_files(out) == ["by-env"]


def test_make_synth_refuses_an_unknown_env_before_the_cdk(make: Make) -> None:
    skip_setup = ["-o", ".venv/.installed", "-o", "node_modules/.installed", f"SYNTH_OUT={make.tmp / 'out'}"]
    result = make(*skip_setup, "synth", "ENV=staging")
    assert result.returncode == 2
    [line] = _lines(result.stderr)
    assert line.startswith(
        f"error: ENV=staging is not an environment: use one of {', '.join(environment_names(make.config))}"
    )
    assert not make.calls.exists()


def test_ctrl_c_during_synth_leaves_no_lock_and_no_assembly(make: Make) -> None:
    """SIGINT to the whole process group, as a terminal's Ctrl-C: the stand-in CDK holds the CLI's write
    lock (synth.lock) in the folder it synthesizes into when it is interrupted."""
    make.synthesizes(endpoint_stack("sonic-dev"))
    assert make("diff", "ENV=dev").returncode == 0
    command = [
        sys.executable, "-m", "sonic_deploy.changes.synth", "--config", str(make.config), "--cdk", make.cdk,
        "--env", "dev", "--output", str(make.tmp / "synth/dev"),
    ]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=REPO, env=make.env | {"FAKE_SYNTH_FAILS": "hang"}, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        assert process.stderr.readline() == "waiting\n"  # the stand-in holds the lock now
        os.killpg(process.pid, signal.SIGINT)
        rest = process.stderr.read()
        assert process.wait(timeout=60) == 130
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert rest == "sonic-deploy: synth interrupted; no assembly was written\n"
    assert _assembly_files(make.tmp / "synth/dev") == []
    assert not list(make.tmp.rglob("*.lock"))


def test_make_ci_roles_needs_a_repository_and_reaches_the_command(make: Make) -> None:
    result = make("ci-roles", "ENV=dev", f"PY={sys.executable}")
    assert result.returncode == 2
    assert (
        "--repository '': not a GitHub repository, OWNER/REPO" in result.stderr and "Fix: " in result.stderr
    )
    result = make("ci-roles", "ENV=dev", "REPOSITORY=acme/sonic-deploy", f"PY={sys.executable}")
    assert (
        result.returncode == 2
        and "deploying stack sonic-deploy-ci-dev needs AWS credentials" in result.stderr
    )
