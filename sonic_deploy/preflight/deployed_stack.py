"""`--after-deploy`'s first check for any route: its stack is deployed, not failed or being deleted, and has
the outputs the rest of the checks read (cloudformation:DescribeStacks)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from sonic_deploy.config import Settings
from sonic_deploy.preflight.results import CheckResult, aws_error, failed, passed
from sonic_deploy.stack_outputs import DeployedStack, describe_stack

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient


def check_route_stack(
    cloudformation: CloudFormationClient, settings: Settings, route: str, needed: Iterable[str]
) -> tuple[CheckResult, DeployedStack | None]:
    """A failure and None; or a pass (its detail the stack's status) and the stack, with every `needed`
    output."""
    name, region = settings.stack_name(route), settings.environment.region
    check = f"stack {name}"
    try:
        stack = describe_stack(cloudformation, name)
    except ClientError as error:
        return aws_error(check, error, "cloudformation:DescribeStacks"), None
    if stack is None:
        deploy = f"make deploy ENV={settings.environment_name} ROUTE={route}"
        return failed(
            check, f"not deployed in {region}", f"{deploy}, send it traffic, then run this again"
        ), None
    if stack.status.endswith("_FAILED") or stack.status.startswith("DELETE_"):
        return failed(
            check,
            stack.status,
            f"`aws cloudformation describe-stack-events --stack-name {name} --region {region}` shows why; "
            "fix that, then deploy again",
        ), None
    missing = stack.missing(needed)
    if missing:
        return failed(
            check,
            f"{stack.status}, without the output {', '.join(missing)}",
            "wait for the deploy to finish, or deploy again (a failed first create writes no outputs)",
        ), None
    return passed(check, stack.status), stack
