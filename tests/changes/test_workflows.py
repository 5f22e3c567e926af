"""The GitHub Actions workflows: actionlint-clean, OIDC only, and in step with config/ and the Makefile."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sonic_deploy.config import STACK_IDS, environment_names

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPO / ".github/workflows").glob("*.yml"))
MAKE_COMMAND = re.compile(r"\bmake\s+([a-z][\w-]*)")


def actionlint() -> str:
    beside_python = Path(sys.executable).parent / "actionlint"
    found = str(beside_python) if beside_python.exists() else shutil.which("actionlint")
    if found is None:
        pytest.fail("actionlint is not installed: run `make setup` (it comes with the dev dependencies)")
    return found


def run_actionlint(*files: Path) -> subprocess.CompletedProcess[str]:
    command = [actionlint(), "-color=false", "-oneline", *map(str, files)]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)


def load(name: str) -> dict[Any, Any]:
    loaded = yaml.safe_load((REPO / ".github/workflows" / name).read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def test_both_workflows_exist() -> None:
    assert [p.name for p in WORKFLOWS] == ["ci.yml", "deploy.yml"]


def test_workflows_pass_actionlint() -> None:
    result = run_actionlint(*WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: pull_request\n"
        "jobs:\n"
        "  diff:\n"
        "    needs: tset\n"
        "    runs-on: ubuntu-latest\n"
        "    steps:\n"
        '      - run: echo "${{ github.event.pull_request.title }}"\n',
        encoding="utf-8",
    )
    result = run_actionlint(broken)
    assert result.returncode == 1
    assert "tset" in result.stdout and "potentially untrusted" in result.stdout


def test_no_long_lived_aws_keys() -> None:
    for workflow in WORKFLOWS:
        text = workflow.read_text(encoding="utf-8")
        assert "aws-access-key-id" not in text and "aws-secret-access-key" not in text, workflow.name
        for role in re.findall(r"role-to-assume:\s*(.+)", text):
            assert role.strip() in ("${{ vars.AWS_DIFF_ROLE_ARN }}", "${{ vars.AWS_DEPLOY_ROLE_ARN }}"), role


def test_deploy_choices_match_config_and_routes() -> None:
    inputs = load("deploy.yml")[True]["workflow_dispatch"]["inputs"]  # YAML 1.1 reads the key `on` as True
    assert inputs["environment"]["options"] == environment_names(REPO / "config"), (
        "update the environment choices in .github/workflows/deploy.yml to list config/environments/*.toml"
    )
    assert sorted(inputs["route"]["options"]) == sorted(STACK_IDS)


def test_deploy_runs_only_after_the_diff_in_a_protected_environment() -> None:
    deploy = load("deploy.yml")["jobs"]["deploy"]
    assert deploy["needs"] == "diff"
    assert deploy["environment"] == "${{ inputs.environment }}"
    assert any("APPROVAL=never" in str(step.get("run", "")) for step in deploy["steps"])


def test_the_deploy_workflow_refuses_placeholders_before_aws_credentials() -> None:
    """The diff job checks (`target --deploy`) before it assumes a role; the deploy job runs only after it
    (and `make deploy` checks once more)."""
    jobs = load("deploy.yml")["jobs"]
    steps = jobs["diff"]["steps"]
    check = next(i for i, step in enumerate(steps) if "--deploy" in str(step.get("run", "")))
    credentials = next(
        i for i, step in enumerate(steps) if "configure-aws-credentials" in str(step.get("uses"))
    )
    assert "sonic_deploy.changes target" in steps[check]["run"] and check < credentials
    assert jobs["deploy"]["needs"] == "diff"


def test_ci_gate_runs_make_test_and_a_diff_per_environment() -> None:
    jobs = load("ci.yml")["jobs"]
    assert any(step.get("run") == "make test" for step in jobs["test"]["steps"])
    assert (
        jobs["diff"]["strategy"]["matrix"]["environment"]
        == "${{ fromJSON(needs.test.outputs.environments) }}"
    )
    assert any("make diff" in str(step.get("run", "")) for step in jobs["diff"]["steps"])


@pytest.mark.parametrize(
    "target", sorted({t for w in WORKFLOWS for t in MAKE_COMMAND.findall(w.read_text())})
)
def test_every_make_target_the_workflows_call_exists(target: str) -> None:
    result = subprocess.run(
        ["make", "-n", target, "ENV=dev", "ROUTE=sagemaker", "DEPLOY_SETUP="],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert "No rule to make target" not in result.stderr, result.stderr
