"""A deployed stack as CloudFormation describes it (DescribeStacks, read-only): what the operator tools read
their deployment's names and addresses from. No aws_cdk here."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient


@dataclass(frozen=True)
class DeployedStack:
    name: str
    stack_id: str
    """The stack's ARN: arn:<partition>:cloudformation:<region>:<account>:stack/<name>/<uuid>."""
    status: str
    outputs: dict[str, str]

    def missing(self, names: Iterable[str]) -> list[str]:
        """The outputs of `names` the stack does not have (an older template, or a failed first create)."""
        return [name for name in names if name not in self.outputs]

    @property
    def partition_and_account(self) -> tuple[str, str] | None:
        """From the stack's ARN, for the ARNs of what it made; None if the ARN has another form."""
        parts = self.stack_id.split(":")
        if len(parts) < 6 or parts[0] != "arn" or not parts[4].isdigit():
            return None
        return parts[1], parts[4]


def describe_stack(cloudformation: CloudFormationClient, stack_name: str) -> DeployedStack | None:
    """The stack, or None when it is not deployed (CloudFormation's ValidationError "Stack with id ... does
    not exist"). Any other ClientError, and BotoCoreError (no credentials, no network), is the caller's."""
    from botocore.exceptions import ClientError

    try:
        (stack,) = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    except ClientError as error:
        if "does not exist" in str(error):
            return None
        raise
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", []) if "OutputValue" in o}
    return DeployedStack(stack["StackName"], stack.get("StackId", ""), stack["StackStatus"], outputs)
