"""`sonic-deploy mirror --env NAME`: the script that copies the EKS route's charts and images into
[eks.mirror], run under bash against stand-ins for aws, helm and crane that record their command lines; and
the mistakes, each one line and exit 2, before anything is printed on stdout."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from sonic_deploy.cli import main
from sonic_deploy.routes.eks.charts import CHARTS
from tests.cdk_context import ROOT
from tests.conftest import EditConfig

HOST = "123456789012.dkr.ecr.us-east-2.amazonaws.com"
SHIPPED = (
    '# [eks.mirror]\n# charts = "123456789012.dkr.ecr.us-east-2.amazonaws.com/sonic-mirror/charts"\n'
    '# images = "123456789012.dkr.ecr.us-east-2.amazonaws.com/sonic-mirror"'
)
# What each stand-in does: record its command line; `aws ecr get-login-password` prints a token, `aws ecr
# describe-repositories` finds none (so each repository is created), a login reads its password from stdin.
STAND_IN = """#!/usr/bin/env bash
echo "$(basename "$0") $*" >> "$CALLS"
case "$(basename "$0") $1 $2" in
  "aws ecr get-login-password") echo token ;;
  "aws ecr describe-repositories") exit 254 ;;
  "helm registry login"|"crane auth login") cat > /dev/null ;;
esac
"""


@pytest.fixture
def mirrored(edit_config: EditConfig) -> Path:
    return edit_config("environments/dev-eks.toml", SHIPPED, SHIPPED.replace("# ", ""))


def _mirror(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["mirror", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_script_logs_in_creates_the_repositories_and_copies_each_chart_and_image(
    mirrored: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, script, err = _mirror(capsys, "--env", "dev-eks", "--config-dir", str(mirrored))
    assert (code, err) == (0, "")
    tools = tmp_path / "bin"
    tools.mkdir()
    for tool in ("aws", "helm", "crane"):
        (tools / tool).write_text(STAND_IN)
        (tools / tool).chmod(0o755)
    calls = tmp_path / "calls"
    environment = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}", "CALLS": str(calls)}
    bash = shutil.which("bash")
    assert bash is not None
    done = subprocess.run([bash, "-c", script], env=environment, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    ran = calls.read_text().splitlines()
    # Each login a pipeline: its two sides run at once, in either order.
    assert sorted(ran[:4]) == [
        "aws ecr get-login-password --region us-east-2",
        "aws ecr get-login-password --region us-east-2",
        f"crane auth login {HOST} --username AWS --password-stdin",
        f"helm registry login --username AWS --password-stdin {HOST}",
    ]
    created = [line.rsplit(" ", 1)[1] for line in ran if line.startswith("aws ecr create-repository")]
    assert len(created) == 8 + 12
    assert "sonic-mirror/charts/karpenter" in created
    assert "sonic-mirror/public.ecr.aws/karpenter/controller" in created
    assert "sonic-mirror/registry.k8s.io/csi-secrets-store/driver-crds" in created
    helm = [line for line in ran if line.startswith(("helm pull", "helm push"))]
    assert helm[:4] == [
        "helm pull oci://public.ecr.aws/karpenter/karpenter-crd --version 1.14.1",
        f"helm push karpenter-crd-1.14.1.tgz oci://{HOST}/sonic-mirror/charts",
        "helm pull oci://public.ecr.aws/karpenter/karpenter --version 1.14.1",
        f"helm push karpenter-1.14.1.tgz oci://{HOST}/sonic-mirror/charts",
    ]
    assert helm[4:6] == [
        "helm pull aws-load-balancer-controller --repo https://aws.github.io/eks-charts --version 3.5.0",
        f"helm push aws-load-balancer-controller-3.5.0.tgz oci://{HOST}/sonic-mirror/charts",
    ]
    assert len(helm) == 2 * len(CHARTS)
    copies = [line.split()[2:] for line in ran if line.startswith("crane copy")]
    assert len(copies) == 12
    # The digest-pinned source, so the copy is the index the chart names; the tag kept in the mirror.
    assert copies[0] == [
        "public.ecr.aws/karpenter/controller:1.14.1@sha256:"
        "445baefaaa689029cc12ac1f659b916b0b82fb14308ce536f8521fcf079116fa",
        f"{HOST}/sonic-mirror/public.ecr.aws/karpenter/controller:1.14.1",
    ]
    assert [
        "ghcr.io/kedacore/keda:2.20.2",
        f"{HOST}/sonic-mirror/ghcr.io/kedacore/keda:2.20.2",
    ] in copies


def test_the_script_says_what_it_needs_and_what_it_leaves_to_the_stack(
    mirrored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, script, _ = _mirror(capsys, "--env", "dev-eks", "--config-dir", str(mirrored))
    head = script.split("set -euo pipefail")[0]
    assert "8 charts and 12 controller images" in head
    assert "helm 3.8 or later and crane" in head and "account 123456789012's ECR in us-east-2" in head
    assert "the stack copies them at deploy" in head
    assert script.rstrip().endswith("sonic-deploy preflight --env dev-eks checks each one is there.")


def test_without_a_mirror_it_says_what_to_add(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _mirror(capsys, "--env", "dev-eks", "--config-dir", str(ROOT / "config"))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert err.startswith(
        f"sonic-deploy mirror: {ROOT / 'config'}/environments/dev-eks.toml: eks.mirror = (missing): nothing "
        "says where in your ECR the charts and images go. Fix: add [eks.mirror] charts = "
    )


def test_an_environment_without_the_eks_route_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _mirror(capsys, "--env", "dev", "--config-dir", str(ROOT / "config"))
    assert (code, out) == (2, "")
    assert "dev.toml: eks = (missing): environment dev does not deploy the EKS route" in err
    assert "Fix: pass the --env of an environment with an [eks] table" in err


def test_an_unknown_environment_is_a_config_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _mirror(capsys, "--env", "staging", "--config-dir", str(ROOT / "config"))
    assert (code, out) == (2, "")
    assert "env = 'staging': unknown environment. Fix: use one of dev, dev-eks, prod" in err
