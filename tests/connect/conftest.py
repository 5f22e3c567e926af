"""A real CloudFormation client answered by botocore's Stubber (DescribeStacks in the shape CloudFormation
returns it), handed to `sonic-deploy connect` in place of the one it would make."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.stub import Stubber

from sonic_deploy.connect import command

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient

REGION = "us-east-2"
ACCOUNT = "123456789012"
NLB = "sonic-dev-Api-0123456789abcdef.elb.us-east-2.amazonaws.com"
DEPLOYED_ECS_OUTPUTS = {
    "ApiUrl": f"ws://{NLB}:80/tts/websocket",
    "ModelId": "sonic-3",
    "CartesiaVersion": "2025-04-16",
    "ApiKeySecret": "sonic/dev/cartesia-api-key",
    "Region": REGION,
    "ClusterName": "sonic-dev-ecs-Cluster-abc",
    "AvailabilityZone": "us-east-2a",
}
DEPLOYED_SAGEMAKER_OUTPUTS = {
    "EndpointName": "sonic-dev",
    "VariantName": "AllTraffic",
    "RuntimeVpcEndpointDns": "vpce-0123456789abcdef0-abcdefgh.runtime.sagemaker.us-east-2.vpce.amazonaws.com",
    "Region": REGION,
}


def stack_description(
    name: str, outputs: dict[str, str], status: str = "UPDATE_COMPLETE", stack_id: str | None = None
) -> dict[str, Any]:
    """DescribeStacks' answer for one stack, with the fields CloudFormation fills for a CDK-deployed one."""
    created = datetime.datetime(2026, 11, 2, 9, 30, tzinfo=datetime.UTC)
    return {
        "Stacks": [
            {
                "StackId": stack_id
                or f"arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{name}/5f1c2b40-b1a9-11f0-8e5c-0a1b2c3d4e5f",
                "StackName": name,
                "Description": f"sonic-deploy dev: Cartesia Sonic, {name.rsplit('-', 1)[1]} route",
                "Parameters": [
                    {"ParameterKey": "BootstrapVersion", "ParameterValue": "/cdk-bootstrap/hnb659fds/version"}
                ],
                "CreationTime": created,
                "LastUpdatedTime": created + datetime.timedelta(days=3),
                "RollbackConfiguration": {},
                "StackStatus": status,
                "DisableRollback": False,
                "NotificationARNs": [],
                "Capabilities": ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
                "Outputs": [{"OutputKey": key, "OutputValue": value} for key, value in outputs.items()],
                "Tags": [{"Key": "project", "Value": "sonic-deploy"}, {"Key": "environment", "Value": "dev"}],
                "EnableTerminationProtection": False,
                "DriftInformation": {"StackDriftStatus": "NOT_CHECKED"},
            }
        ]
    }


@dataclass
class StubbedCloudFormation:
    client: CloudFormationClient
    stubber: Stubber
    made_for: list[tuple[str | None, str]] = field(default_factory=list)
    """(profile, region) of each client connect asked for."""

    def deployed(self, name: str, outputs: dict[str, str], **details: Any) -> None:
        self.stubber.add_response(
            "describe_stacks", stack_description(name, outputs, **details), {"StackName": name}
        )

    def error(self, name: str, code: str, message: str, status: int) -> None:
        self.stubber.add_client_error(
            "describe_stacks",
            service_error_code=code,
            service_message=message,
            http_status_code=status,
            expected_params={"StackName": name},
        )


@pytest.fixture
def cloudformation(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubbedCloudFormation]:
    client = boto3.client(
        "cloudformation", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    with Stubber(client) as stubber:
        stubbed = StubbedCloudFormation(client, stubber)

        def make(profile: str | None, region: str) -> CloudFormationClient:
            stubbed.made_for.append((profile, region))
            return client

        monkeypatch.setattr(command, "cloudformation_client", make)
        yield stubbed
        stubber.assert_no_pending_responses()
