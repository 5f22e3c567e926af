"""`python -m sonic_deploy.changes ci-roles` (`make ci-roles`), against moto's CloudFormation and IAM:
creates the stack once with the roles config/bootstrap/ci-roles.json describes, changes nothing on a second
run, and prints the GitHub variables to set."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sonic_deploy.changes.cli import main

ACCOUNT = "123456789012"  # moto's account
# moto's CloudFormation makes no OIDC provider (it warns and skips it); the roles are what is checked here.
pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse AWS..IAM..OIDCProvider")


def run(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    code = main(["ci-roles", "--env", "prod", "--repository", "acme/sonic-deploy", *extra])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_creates_the_roles_and_prints_the_variables(iam: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--diff-role", "--oidc-provider")
    assert code == 0 and "stack sonic-deploy-ci-prod in us-east-2: created" in err
    assert out == (
        f"AWS_DEPLOY_ROLE_ARN=arn:aws:iam::{ACCOUNT}:role/github-sonic-deploy-prod\n"
        f"AWS_DIFF_ROLE_ARN=arn:aws:iam::{ACCOUNT}:role/github-sonic-deploy-diff\n"
    )
    trust = iam.get_role(RoleName="github-sonic-deploy-prod")["Role"]["AssumeRolePolicyDocument"]
    conditions = json.dumps(trust["Statement"][0]["Condition"])
    assert (
        '"token.actions.githubusercontent.com:sub": "repo:acme/sonic-deploy:environment:prod"' in conditions
    )


def test_a_second_run_changes_nothing(iam: Any, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys)
    code, out, err = run(capsys)
    assert code == 0 and "unchanged" in err
    assert out == f"AWS_DEPLOY_ROLE_ARN=arn:aws:iam::{ACCOUNT}:role/github-sonic-deploy-prod\n"


def test_a_repository_that_is_not_owner_slash_name_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["ci-roles", "--env", "prod", "--repository", "acme"])
    err = capsys.readouterr().err.strip()
    assert stopped.value.code == 2 and len(err.splitlines()) == 1
    assert "--repository 'acme': not a GitHub repository, OWNER/REPO" in err and "Fix: " in err
