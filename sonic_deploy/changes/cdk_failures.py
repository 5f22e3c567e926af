"""Recognise the CDK failures a new user meets first (no credentials, no bootstrap) and say what to do."""

from __future__ import annotations

import re

from botocore.exceptions import BotoCoreError, ClientError

# What the CDK CLI prints when the bootstrap stack (or its version parameter) is missing.
NOT_BOOTSTRAPPED = re.compile(
    r"Has the environment been bootstrapped\?"
    r"|SSM parameter /cdk-bootstrap/\S+ not found"
    r"|is not bootstrapped"
    r"|Please run 'cdk bootstrap'",
    re.IGNORECASE,
)
# What the CDK CLI prints when it finds no credentials to deploy with.
NO_CREDENTIALS = re.compile(
    r"Unable to resolve AWS account to use|Need to perform AWS calls for account .*, but no credentials",
    re.IGNORECASE,
)
ACCOUNT_PLACEHOLDER = "ACCOUNT"


def caller_account(region: str) -> str | None:
    """The account of the credentials in use, or None when there are none (offline, signed out)."""
    try:
        import boto3  # here: the subcommands that make no AWS call start 0.13 s sooner

        return boto3.client("sts", region_name=region).get_caller_identity()["Account"]
    except (BotoCoreError, ClientError):
        return None


def bootstrap_command(account: str | None, region: str) -> str:
    return f"cdk bootstrap aws://{account or ACCOUNT_PLACEHOLDER}/{region}"


def bootstrap_hint(cdk_output: str, *, environment: str, region: str, account: str | None) -> str | None:
    """The message to show after a failed `cdk deploy`/`destroy`, or None if it failed for another reason."""
    match = NOT_BOOTSTRAPPED.search(cdk_output)
    if match is None:
        return None
    lines = [
        f"The CDK is not bootstrapped in aws://{account or ACCOUNT_PLACEHOLDER}/{region} "
        f'(the CDK said: "{match.group(0)}").',
        "Bootstrap once per account and Region, with the credentials you deploy with:",
        f"    make bootstrap ENV={environment}      # runs {bootstrap_command(account, region)}",
        "then run the same make command again. See docs/deploy.md, 'Bootstrap'.",
    ]
    if account is None:
        lines.insert(
            3, "(ACCOUNT is your 12-digit account ID: `aws sts get-caller-identity --query Account`.)"
        )
    return "\n".join(lines)


def credentials_hint(cdk_output: str) -> str | None:
    if NO_CREDENTIALS.search(cdk_output) is None:
        return None
    return (
        "The CDK found no AWS credentials. Sign in with the account you deploy to, e.g. "
        "`aws sso login --profile NAME` and `export AWS_PROFILE=NAME`, then run the same make command again."
    )
