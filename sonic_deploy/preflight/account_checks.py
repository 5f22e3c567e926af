"""Checks every route needs: the credentials' account, the CDK bootstrap stack, the client ranges' rules."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from sonic_deploy.config import Settings
from sonic_deploy.config.aws_limits import DEFAULT_RULES_PER_GROUP, OTHER_INBOUND_RULES
from sonic_deploy.preflight.quotas import increase_command, quota_by_name
from sonic_deploy.preflight.results import CheckResult, aws_error, error_code, error_message, failed, passed

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_service_quotas import ServiceQuotasClient
    from mypy_boto3_sts import STSClient

BOOTSTRAP_STACK = "CDKToolkit"
RULES_QUOTA = "Inbound or outbound rules per security group"  # Service Quotas, service code vpc
# From aws-cdk-lib 2.275's DefaultStackSynthesizer (core/lib/stack-synthesizers/default-synthesizer.js):
# MIN_BOOTSTRAP_STACK_VERSION = 6 for deploying (each template's CheckBootstrapVersion rule enforces it) and
# MIN_LOOKUP_ROLE_BOOTSTRAP_STACK_VERSION = 8 for context lookups. sonic-deploy names its AZs instead of looking
# them up, so 6 is the floor; below 8 the check still passes but says lookups would need a re-bootstrap.
MIN_BOOTSTRAP_VERSION = 6
LOOKUP_BOOTSTRAP_VERSION = 8
_BROKEN_STACK_STATES = (
    "ROLLBACK_COMPLETE",
    "ROLLBACK_FAILED",
    "DELETE_IN_PROGRESS",
    "DELETE_FAILED",
    "CREATE_FAILED",
    "UPDATE_ROLLBACK_FAILED",
)


def check_identity(sts: STSClient, settings: Settings) -> tuple[CheckResult, str | None]:
    """Whose credentials these are; the account id, or None when there are no usable credentials."""
    check = "credentials and account"
    env_file = f"config/environments/{settings.environment_name}.toml"
    try:
        identity = sts.get_caller_identity()
    except NoCredentialsError:
        return failed(
            check,
            "no AWS credentials found",
            "configure credentials (aws configure, aws sso login, AWS_PROFILE) or pass --profile",
        ), None
    except ClientError as error:
        return failed(
            check,
            f"the credentials were refused: {error_code(error)}: {error_message(error)}",
            "refresh them (an expired session token is the usual cause: aws sso login)",
        ), None
    except BotoCoreError as error:
        return failed(check, f"cannot reach AWS STS: {error}", "check the network and the Region"), None
    account = identity["Account"]
    expected = settings.environment.account
    if expected is not None and expected != account:
        return failed(
            check,
            f"the credentials are for account {account}, {env_file} says account = {expected}",
            f"use credentials for {expected} (--profile NAME), or correct `account` in {env_file}",
        ), None
    scope = f"matches {env_file}" if expected else f"{env_file} names no account: deploying into this one"
    return passed(check, f"account {account} as {identity['Arn']} ({scope})"), account


def check_bootstrap(cloudformation: CloudFormationClient, account: str, region: str) -> CheckResult:
    check = "CDK bootstrap"
    fix = f"run `cdk bootstrap aws://{account}/{region}` with a current CDK CLI"
    try:
        stacks = cloudformation.describe_stacks(StackName=BOOTSTRAP_STACK)["Stacks"]
    except ClientError as error:
        if "does not exist" in error_message(error):
            return failed(check, f"no {BOOTSTRAP_STACK} stack in {account} / {region}", fix)
        return aws_error(check, error, "cloudformation:DescribeStacks")
    stack = stacks[0]
    status = stack["StackStatus"]
    if status in _BROKEN_STACK_STATES:
        return failed(
            check,
            f"{BOOTSTRAP_STACK} is in state {status}",
            f"delete the failed {BOOTSTRAP_STACK} stack (and its staging bucket if kept), then {fix}",
        )
    outputs = {output.get("OutputKey"): output.get("OutputValue") for output in stack.get("Outputs", [])}
    version_text = outputs.get("BootstrapVersion")
    if version_text is None or not str(version_text).isdigit():
        return failed(check, f"{BOOTSTRAP_STACK} has no BootstrapVersion output (a legacy bootstrap)", fix)
    version = int(version_text)
    if version < MIN_BOOTSTRAP_VERSION:
        return failed(
            check,
            f"{BOOTSTRAP_STACK} is version {version}, sonic-deploy needs {MIN_BOOTSTRAP_VERSION} or later",
            fix,
        )
    lookups = (
        ""
        if version >= LOOKUP_BOOTSTRAP_VERSION
        else (
            f"; context lookups would need version {LOOKUP_BOOTSTRAP_VERSION}: re-bootstrap before adding any"
        )
    )
    return passed(
        check, f"{BOOTSTRAP_STACK} version {version} ({status}), at least {MIN_BOOTSTRAP_VERSION}{lookups}"
    )


def check_client_rules_quota(quotas: ServiceQuotasClient, settings: Settings) -> CheckResult:
    """One inbound rule per `network.client_cidrs` range and OTHER_INBOUND_RULES more in one security group:
    EC2 refuses a rule past the account's quota, tens of minutes into a deploy. Service Quotas is asked only
    past AWS's default, which every account has."""
    needed = len(settings.environment.network.client_cidrs) + OTHER_INBOUND_RULES
    check = f"quota: {RULES_QUOTA}"
    if needed <= DEFAULT_RULES_PER_GROUP:
        return passed(check, f"needs {needed}, within AWS's default of {DEFAULT_RULES_PER_GROUP}")
    try:
        quota = quota_by_name(quotas, "vpc", RULES_QUOTA)
    except ClientError as error:
        return aws_error(check, error, "servicequotas:ListServiceQuotas")
    value = quota.value if quota is not None else DEFAULT_RULES_PER_GROUP
    source = "applied" if quota is not None and quota.applied else "AWS default"
    detail = f"{value:g} ({source}); needs {needed}: {needed - OTHER_INBOUND_RULES} client ranges + {OTHER_INBOUND_RULES}"
    if value >= needed:
        return passed(check, detail)
    fix = (
        increase_command("vpc", quota, needed, settings.environment.region)
        if quota
        else "raise it in Service Quotas"
    )
    return failed(check, detail, f"request {needed}: {fix}, or merge client ranges into wider ones")
