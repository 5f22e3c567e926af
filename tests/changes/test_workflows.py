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
    assert deploy["needs"] == ["checks", "diff"]
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
    assert "diff" in jobs["deploy"]["needs"]


def test_no_deploy_without_make_test_and_the_compliance_gate() -> None:
    """The deploy job needs a job that runs `make test` and `make compliance` (the gate, invariants
    included); that job holds no AWS credentials, so the dev set it installs never meets a role."""
    jobs = load("deploy.yml")["jobs"]
    needed = [jobs[name] for name in jobs["deploy"]["needs"]]
    runs = [str(step.get("run", "")) for job in needed for step in job["steps"]]
    assert "make test" in runs and "make compliance" in runs
    checks = next(job for job in needed if "make test" in [str(s.get("run", "")) for s in job["steps"]])
    assert checks["permissions"] == {"contents": "read"}
    assert not any("configure-aws-credentials" in str(step.get("uses")) for step in checks["steps"])
    assert not any("actions/cache@" in str(step.get("uses", "")) for step in checks["steps"])


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


# `uses: owner/repo@<40 hex> # vX.Y.Z`: a tag can be moved to other code; a commit cannot.
PINNED_USES = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+(\.\d+){0,2}$")


def all_steps(workflow: Path) -> list[dict[Any, Any]]:
    loaded = yaml.safe_load(workflow.read_text(encoding="utf-8"))
    return [step for job in loaded["jobs"].values() for step in job.get("steps", [])]


def uses_lines(workflow: Path) -> list[str]:
    """Each `uses:` value with its trailing comment (YAML drops comments, so read the text)."""
    return re.findall(r"^\s*(?:-\s+)?uses:\s*(.+?)\s*$", workflow.read_text(encoding="utf-8"), flags=re.M)


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_pinned_by_commit_sha_with_its_version(workflow: Path) -> None:
    found = uses_lines(workflow)
    assert len(found) == sum("uses" in step for step in all_steps(workflow)) > 0
    for line in found:
        assert PINNED_USES.match(line), (
            f"{workflow.name}: `uses: {line}`: pin the action by full commit SHA with the tag as a comment, "
            "e.g. `actions/checkout@<sha> # v5.1.0` (git rev-parse <tag>^{commit} in the action's repository)"
        )


def test_the_pin_pattern_refuses_a_tag_and_a_short_sha() -> None:
    assert not PINNED_USES.match("actions/checkout@v5")
    assert not PINNED_USES.match("actions/checkout@fbc6f39 # v5.1.0")
    assert not PINNED_USES.match("actions/checkout@fbc6f3992d24b796d5a048ff273f7fcc4a7b6c09")
    assert PINNED_USES.match("actions/checkout@fbc6f3992d24b796d5a048ff273f7fcc4a7b6c09 # v5.1.0")


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_no_checkout_keeps_the_token(workflow: Path) -> None:
    checkouts = [s for s in all_steps(workflow) if str(s.get("uses", "")).startswith("actions/checkout@")]
    assert checkouts
    for step in checkouts:
        assert step.get("with", {}).get("persist-credentials") is False, (
            f"{workflow.name}: set `persist-credentials: false` on actions/checkout: later steps (make, "
            "pip, npm) need no token in .git/config"
        )


def test_the_deploy_workflow_installs_only_the_hash_locked_requirements() -> None:
    """Both jobs hold AWS credentials: they set up with `make setup-deploy` (pip --require-hashes), restore
    no cache, and pass DEPLOY_SETUP= so that no make target installs the unpinned `.[dev]` set."""
    jobs = load("deploy.yml")["jobs"]
    for name in ("diff", "deploy"):
        steps = jobs[name]["steps"]
        runs = [str(step.get("run", "")) for step in steps]
        assert "make setup-deploy" in runs, name
        assert not any("actions/cache@" in str(step.get("uses", "")) for step in steps), name
        assert not any("cache" in step.get("with", {}) for step in steps), name
        for run in runs:
            for target in MAKE_COMMAND.findall(run):
                if target != "setup-deploy":
                    assert "DEPLOY_SETUP=" in run, f"{name}: `{run.strip()}` would run `make setup`"
    diff = load("ci.yml")["jobs"]["diff"]
    assert any(step.get("run") == "make setup-deploy" for step in diff["steps"])


def test_setup_deploy_installs_with_hashes_then_the_project_without_dependencies() -> None:
    result = subprocess.run(
        ["make", "-n", "setup-deploy"], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    commands = result.stdout.replace("\\\n", " ")
    pip_lines = [line for line in commands.splitlines() if "pip install" in line]
    assert len(pip_lines) == 2, result.stdout
    assert "--require-hashes" in pip_lines[0] and "-r requirements/deploy.txt" in pip_lines[0]
    assert "--only-binary :all:" in pip_lines[0]
    assert "--no-deps" in pip_lines[1] and "--no-build-isolation" in pip_lines[1] and "-e ." in pip_lines[1]
    assert 'npm-cli.js" ci' in commands


def test_deploy_runs_only_from_main() -> None:
    jobs = load("deploy.yml")["jobs"]
    assert jobs["deploy"]["if"] == "github.ref == 'refs/heads/main'"
    first = jobs["diff"]["steps"][0]
    assert first["if"] == "github.ref != 'refs/heads/main'" and "exit 1" in first["run"]
