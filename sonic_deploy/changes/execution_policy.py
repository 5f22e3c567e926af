"""The policies of CloudFormation's execution role, for `make bootstrap`: customer-managed IAM policies made
from config/bootstrap/cloudformation-execution-policy.json (split across as many policies as IAM's size
quota needs), passed to `cdk bootstrap --cloudformation-execution-policies` instead of CDK's default
AdministratorAccess; and the permissions boundary every role of the stacks carries, from
config/bootstrap/permissions-boundary.json (sonic_deploy/stacks/boundary.py names it).

Each is created once per account, then updated in place (a new default version) when the file changes;
running it again with the same files changes nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from sonic_deploy.config.bootstrap import PERMISSIONS_BOUNDARY_NAME

POLICY_NAME = "sonic-deploy-cloudformation-execution"
POLICY_DESCRIPTION = (
    "What CloudFormation may do when it deploys the sonic-deploy stacks (make bootstrap, "
    "config/bootstrap/cloudformation-execution-policy.json)"
)
BOUNDARY_DESCRIPTION = (
    "The most any role of the sonic-deploy stacks may do (make bootstrap, "
    "config/bootstrap/permissions-boundary.json)"
)
# "Managed policy character size: 6,144" (whitespace not counted): IAM and AWS STS quotas, IAM User Guide.
# https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html
MAX_POLICY_CHARACTERS = 6144
# "You can have a maximum of five versions of a managed policy": the oldest non-default one goes first.
# https://docs.aws.amazon.com/IAM/latest/UserGuide/access_policies_managed-versioning.html
MAX_POLICY_VERSIONS = 5
NEEDED_PERMISSIONS = (
    "iam:GetPolicy, iam:GetPolicyVersion, iam:CreatePolicy, iam:CreatePolicyVersion, "
    "iam:ListPolicyVersions, iam:DeletePolicyVersion"
)


class ExecutionPolicyError(Exception):
    """The policy file is unusable, or IAM refused; the message says what to do."""


def load_document(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ExecutionPolicyError(f"{path}: no such policy file (EXECUTION_POLICY_FILE)") from None
    except json.JSONDecodeError as error:
        raise ExecutionPolicyError(f"{path}: not JSON ({error})") from None
    if not isinstance(document, dict) or "Statement" not in document:
        raise ExecutionPolicyError(f"{path}: not an IAM policy document (no Statement)")
    return document


def policy_arn(*, partition: str, account: str, name: str = POLICY_NAME) -> str:
    return f"arn:{partition}:iam::{account}:policy/{name}"


def policy_size(document: dict[str, Any]) -> int:
    return len(re.sub(r"\s", "", json.dumps(document)))


def split_document(document: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    """The document's statements, in order, across as few policies as IAM's size quota allows."""
    parts: list[dict[str, Any]] = []
    for statement in document["Statement"]:
        if parts and policy_size({**parts[-1], "Statement": [*parts[-1]["Statement"], statement]}) <= (
            MAX_POLICY_CHARACTERS
        ):
            parts[-1]["Statement"].append(statement)
            continue
        part = {"Version": document.get("Version", "2012-10-17"), "Statement": [statement]}
        if policy_size(part) > MAX_POLICY_CHARACTERS:
            raise ExecutionPolicyError(
                f"{path}: statement {statement.get('Sid', '?')} alone is over IAM's {MAX_POLICY_CHARACTERS} "
                "characters for a managed policy: split it in two"
            )
        parts.append(part)
    return parts


def part_name(index: int) -> str:
    """The first part keeps the name earlier releases gave the one policy."""
    return POLICY_NAME if index == 0 else f"{POLICY_NAME}-{index + 1}"


def _decoded(document: Any) -> Any:
    """IAM returns policy documents URL-encoded; boto3 usually decodes them already."""
    return json.loads(unquote(document)) if isinstance(document, str) else document


def ensure_execution_policy(
    iam: Any, *, arn: str, document: dict[str, Any], description: str = POLICY_DESCRIPTION
) -> str:
    """Make the managed policy at `arn` hold `document`: "created", "updated" or "unchanged"."""
    name = arn.rsplit("/", 1)[1]
    body = json.dumps(document, indent=2)
    try:
        policy = iam.get_policy(PolicyArn=arn)["Policy"]
    except iam.exceptions.NoSuchEntityException:
        iam.create_policy(PolicyName=name, PolicyDocument=body, Description=description)
        return "created"
    default = iam.get_policy_version(PolicyArn=arn, VersionId=policy["DefaultVersionId"])
    if _decoded(default["PolicyVersion"]["Document"]) == document:
        return "unchanged"
    versions = iam.list_policy_versions(PolicyArn=arn)["Versions"]
    if len(versions) >= MAX_POLICY_VERSIONS:
        oldest = min((v for v in versions if not v["IsDefaultVersion"]), key=lambda v: v["CreateDate"])
        iam.delete_policy_version(PolicyArn=arn, VersionId=oldest["VersionId"])
    iam.create_policy_version(PolicyArn=arn, PolicyDocument=body, SetAsDefault=True)
    return "updated"


def apply_execution_policy(
    *, document_path: Path, boundary_path: Path, account: str, region: str
) -> list[tuple[str, str]]:
    """Create or update the boundary, then each part of the execution policy, with the credentials in use:
    (ARN, what was done) of each, the boundary first."""
    document, boundary = load_document(document_path), load_document(boundary_path)
    parts = split_document(document, document_path)
    if len(split_document(boundary, boundary_path)) > 1:
        raise ExecutionPolicyError(f"{boundary_path}: over IAM's {MAX_POLICY_CHARACTERS} characters")
    import boto3  # here: the subcommands that make no AWS call start 0.13 s sooner

    session = boto3.session.Session(region_name=region)
    partition = session.get_partition_for_region(region)
    arn = policy_arn(partition=partition, account=account, name=PERMISSIONS_BOUNDARY_NAME)
    try:
        iam = session.client("iam")
        done = [
            (arn, ensure_execution_policy(iam, arn=arn, document=boundary, description=BOUNDARY_DESCRIPTION))
        ]
        for index, part in enumerate(parts):
            arn = policy_arn(partition=partition, account=account, name=part_name(index))
            done.append((arn, ensure_execution_policy(iam, arn=arn, document=part)))
        return done
    except NoCredentialsError:
        raise ExecutionPolicyError(
            f"creating IAM policy {arn} needs AWS credentials and found none: sign in "
            "(`aws sso login --profile NAME`, `export AWS_PROFILE=NAME`) and retry"
        ) from None
    except ClientError as error:
        message = error.response.get("Error", {}).get("Message", str(error))
        raise ExecutionPolicyError(
            f"creating or updating IAM policy {arn} failed: {message}. The credentials need "
            f"{NEEDED_PERMISSIONS}; or create the policy yourself from {document_path} and pass "
            "EXECUTION_POLICY=<its ARN>"
        ) from None
    except BotoCoreError as error:
        raise ExecutionPolicyError(f"creating or updating IAM policy {arn} failed: {error}") from None
