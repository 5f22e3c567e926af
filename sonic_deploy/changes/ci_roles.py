"""`make ci-roles`: GitHub Actions' roles for one environment, from config/bootstrap/ci-roles.json, as the
CloudFormation stack `sonic-deploy-ci-<env>` (a plain template: not a CDK stack, so CloudFormation runs it
with your credentials, never with the bootstrap's execution role, which cannot touch these roles).

Created the first time, updated when the template or a parameter changed, left alone otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, WaiterError

NO_UPDATES = "No updates are to be performed"
# `repo:OWNER/REPO:...` is the start of every subject claim GitHub's OIDC tokens carry (GitHub Docs,
# "OpenID Connect reference", subject claims); owner and repository names are letters, digits, - _ .
REPOSITORY = r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+"


class CiRolesError(Exception):
    """The stack could not be made; the message says what to do."""


def stack_name(environment: str) -> str:
    return f"sonic-deploy-ci-{environment}"


def parameters(
    *, repository: str, environment: str, oidc_provider: bool, diff_role: bool
) -> list[dict[str, str]]:
    given = {
        "Repository": repository,
        "Environment": environment,
        "CreateOidcProvider": str(oidc_provider).lower(),
        "CreateDiffRole": str(diff_role).lower(),
    }
    return [{"ParameterKey": key, "ParameterValue": value} for key, value in given.items()]


def ensure_stack(cloudformation: Any, *, name: str, body: str, given: list[dict[str, str]]) -> str:
    """Create or update the stack and wait for it: "created", "updated" or "unchanged"."""
    request = {
        "StackName": name,
        "TemplateBody": body,
        "Parameters": given,
        "Capabilities": ["CAPABILITY_NAMED_IAM"],
    }
    try:
        cloudformation.describe_stacks(StackName=name)
    except ClientError as error:
        if "does not exist" not in str(error):
            raise
        cloudformation.create_stack(**request)
        cloudformation.get_waiter("stack_create_complete").wait(StackName=name)
        return "created"
    try:
        cloudformation.update_stack(**request)
    except ClientError as error:
        if NO_UPDATES in str(error):
            return "unchanged"
        raise
    cloudformation.get_waiter("stack_update_complete").wait(StackName=name)
    return "updated"


def apply_ci_roles(
    *, template: Path, repository: str, environment: str, region: str, oidc_provider: bool, diff_role: bool
) -> tuple[str, dict[str, str]]:
    """What was done, and the stack's outputs (the role ARNs for the GitHub variables)."""
    name = stack_name(environment)
    given = parameters(
        repository=repository, environment=environment, oidc_provider=oidc_provider, diff_role=diff_role
    )
    try:
        import boto3  # here: the subcommands that make no AWS call start 0.13 s sooner

        cloudformation = boto3.session.Session(region_name=region).client("cloudformation")
        done = ensure_stack(cloudformation, name=name, body=template.read_text(encoding="utf-8"), given=given)
        outputs = cloudformation.describe_stacks(StackName=name)["Stacks"][0].get("Outputs", [])
    except NoCredentialsError:
        raise CiRolesError(
            f"deploying stack {name} needs AWS credentials and found none: sign in "
            "(`aws sso login --profile NAME`, `export AWS_PROFILE=NAME`) and retry"
        ) from None
    except (ClientError, WaiterError) as error:
        raise CiRolesError(
            f"deploying stack {name} from {template} failed: {error}. The CloudFormation console's events "
            "for the stack say which resource; the credentials need CloudFormation and IAM role rights"
        ) from None
    except BotoCoreError as error:
        raise CiRolesError(f"deploying stack {name} failed: {error}") from None
    return done, {output["OutputKey"]: output["OutputValue"] for output in outputs}
