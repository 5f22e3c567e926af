"""The policy of CloudFormation's execution role, for `make bootstrap`: a customer-managed IAM policy made
from config/bootstrap/cloudformation-execution-policy.json, passed to `cdk bootstrap
--cloudformation-execution-policies` instead of CDK's default AdministratorAccess.

Created once per account, then updated in place (a new default version) when the file changes; running
it again with the same file changes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import boto3
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

POLICY_NAME = "sonic-deploy-cloudformation-execution"
POLICY_DESCRIPTION = (
    "What CloudFormation may do when it deploys the sonic-deploy stacks (make bootstrap, "
    "config/bootstrap/cloudformation-execution-policy.json)"
)
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


def _decoded(document: Any) -> Any:
    """IAM returns policy documents URL-encoded; boto3 usually decodes them already."""
    return json.loads(unquote(document)) if isinstance(document, str) else document


def ensure_execution_policy(iam: Any, *, arn: str, document: dict[str, Any]) -> str:
    """Make the managed policy at `arn` hold `document`: "created", "updated" or "unchanged"."""
    name = arn.rsplit("/", 1)[1]
    body = json.dumps(document, indent=2)
    try:
        policy = iam.get_policy(PolicyArn=arn)["Policy"]
    except iam.exceptions.NoSuchEntityException:
        iam.create_policy(PolicyName=name, PolicyDocument=body, Description=POLICY_DESCRIPTION)
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


def apply_execution_policy(*, document_path: Path, account: str, region: str) -> tuple[str, str]:
    """Create or update the policy with the credentials in use: (its ARN, what was done)."""
    document = load_document(document_path)
    session = boto3.session.Session(region_name=region)
    arn = policy_arn(partition=session.get_partition_for_region(region), account=account)
    try:
        return arn, ensure_execution_policy(session.client("iam"), arn=arn, document=document)
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
