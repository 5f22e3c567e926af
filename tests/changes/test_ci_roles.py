"""config/bootstrap/ci-roles.json, the GitHub Actions roles as code: who may assume them (the OIDC `sub` of
this repository's main branch and pull requests for the diff role, of one GitHub environment for a deploy
role) and what they may do, read from the template as IAM would evaluate it."""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path
from typing import Any

import pytest
from cfnlint.api import lint_file  # type: ignore[import-untyped]

from sonic_deploy.config import load_settings
from sonic_deploy.routes.ecs.preflight_targets import ecs_targets

REPO = Path(__file__).resolve().parents[2]
PATH = REPO / "config/bootstrap/ci-roles.json"
TEMPLATE = json.loads(PATH.read_text(encoding="utf-8"))
EXECUTION_POLICY = json.loads((REPO / "config/bootstrap/cloudformation-execution-policy.json").read_text())
OIDC = "token.actions.githubusercontent.com"
PARAMETERS = {"Repository": "acme/sonic-deploy", "Environment": "prod", "AWS::AccountId": "210987654321"}


def substituted(value: Any) -> str:
    """A template string with its Fn::Sub filled from PARAMETERS (the partition as aws)."""
    text = value["Fn::Sub"] if isinstance(value, dict) else value
    return re.sub(r"\$\{([^}]+)\}", lambda m: PARAMETERS.get(m.group(1), "aws"), text)


def listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def may_assume(role: str, claims: dict[str, str]) -> bool:
    """Whether a GitHub OIDC token with these claims passes the role's trust policy."""
    [statement] = TEMPLATE["Resources"][role]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Effect"] == "Allow" and statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert substituted(statement["Principal"]["Federated"]).endswith(f":oidc-provider/{OIDC}")
    assert set(statement["Condition"]) <= {"StringEquals", "StringLike"}
    for operator, keys in statement["Condition"].items():
        for key, values in keys.items():
            claim = claims.get(key.removeprefix(f"{OIDC}:"), "")
            wanted = [substituted(v) for v in listed(values)]
            if operator == "StringEquals" and claim not in wanted:
                return False
            if operator == "StringLike" and not any(fnmatch.fnmatchcase(claim, w) for w in wanted):
                return False
    return True


def token(sub: str, aud: str = "sts.amazonaws.com") -> dict[str, str]:
    return {"sub": sub, "aud": aud}


def test_the_template_is_valid() -> None:
    assert lint_file(PATH) == []


@pytest.mark.parametrize(
    ("sub", "allowed"),
    [
        ("repo:acme/sonic-deploy:environment:prod", True),
        ("repo:acme/sonic-deploy:environment:dev", False),
        ("repo:acme/sonic-deploy:ref:refs/heads/main", False),
        ("repo:acme/sonic-deploy:pull_request", False),
        ("repo:acme/other:environment:prod", False),
        ("repo:acme/sonic-deploy-fork:environment:prod", False),
    ],
)
def test_a_deploy_role_trusts_one_github_environment_of_this_repository(sub: str, allowed: bool) -> None:
    assert may_assume("DeployRole", token(sub)) is allowed


@pytest.mark.parametrize(
    ("sub", "allowed"),
    [
        ("repo:acme/sonic-deploy:ref:refs/heads/main", True),
        ("repo:acme/sonic-deploy:pull_request", True),
        ("repo:acme/sonic-deploy:ref:refs/heads/feature", False),
        ("repo:acme/sonic-deploy:environment:prod", False),
        ("repo:acme/other:ref:refs/heads/main", False),
    ],
)
def test_the_diff_role_trusts_main_and_pull_requests_of_this_repository(sub: str, allowed: bool) -> None:
    assert may_assume("DiffRole", token(sub)) is allowed


@pytest.mark.parametrize("role", ["DiffRole", "DeployRole"])
def test_a_token_for_another_audience_is_refused(role: str) -> None:
    sub = (
        "repo:acme/sonic-deploy:environment:prod"
        if role == "DeployRole"
        else "repo:acme/sonic-deploy:pull_request"
    )
    assert may_assume(role, token(sub)) and not may_assume(role, token(sub, aud="https://example.com"))


def statements(role: str) -> list[dict[str, Any]]:
    policies = TEMPLATE["Resources"][role]["Properties"]["Policies"]
    return [s for policy in policies for s in policy["PolicyDocument"]["Statement"]]


def test_the_diff_role_only_reads_the_sonic_stacks() -> None:
    [statement] = statements("DiffRole")
    assert all(re.fullmatch(r"cloudformation:(Get|Describe)\w+", a) for a in listed(statement["Action"]))
    assert substituted(statement["Resource"]).endswith(":stack/sonic-*/*")


def test_a_deploy_role_only_assumes_the_cdk_bootstrap_roles_and_describes_sonic_secrets() -> None:
    assume, describe = statements("DeployRole")
    assert assume["Action"] == "sts:AssumeRole"
    for resource in map(substituted, assume["Resource"]):
        assert resource.startswith("arn:aws:iam::210987654321:role/cdk-hnb659fds-"), resource
    assert describe["Action"] == "secretsmanager:DescribeSecret"
    assert substituted(describe["Resource"]) == "arn:aws:secretsmanager:*:210987654321:secret:sonic/*"


@pytest.mark.parametrize("environment", sorted(p.stem for p in (REPO / "config/environments").glob("*.toml")))
def test_make_deploys_secret_check_is_allowed_for_every_shipped_environment(environment: str) -> None:
    """`make deploy` runs preflight --before-deploy, which describes the ECS secrets it imports."""
    targets = ecs_targets(load_settings(REPO / "config", environment))
    for name in targets.secret_names if targets else []:
        arn = f"arn:aws:secretsmanager:eu-west-1:210987654321:secret:{name}-AbCdEf"
        [describe] = [s for s in statements("DeployRole") if s["Action"] == "secretsmanager:DescribeSecret"]
        assert fnmatch.fnmatchcase(arn, substituted(describe["Resource"])), name


def test_cloudformations_execution_role_cannot_touch_the_ci_roles() -> None:
    """Named outside the stacks' `sonic-*`, so the bootstrap execution policy's IAM grants miss them."""
    patterns = [
        r
        for s in EXECUTION_POLICY["Statement"]
        if s["Effect"] == "Allow" and any(str(a).startswith("iam:") for a in listed(s["Action"]))
        for r in listed(s["Resource"])
    ]
    for role in ("DiffRole", "DeployRole"):
        arn = f"arn:aws:iam::210987654321:role/{substituted(TEMPLATE['Resources'][role]['Properties']['RoleName'])}"
        assert not any(fnmatch.fnmatchcase(arn, p) for p in patterns if p != "*"), arn
