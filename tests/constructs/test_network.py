"""Network: private subnets in two AZs, interface endpoints, flow logs; or an existing VPC."""

from __future__ import annotations

from aws_cdk import App, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Match, Template

from sonic_deploy.constructs.network import Network, import_vpc
from tests.conftest import resources_of


def test_private_isolated_subnets_in_two_azs_and_no_internet(sagemaker_template: Template) -> None:
    subnets = resources_of(sagemaker_template, "AWS::EC2::Subnet").values()
    assert {s["Properties"]["AvailabilityZone"] for s in subnets} == {"us-east-2a", "us-east-2b"}
    assert all(s["Properties"]["MapPublicIpOnLaunch"] is False for s in subnets)
    sagemaker_template.resource_count_is("AWS::EC2::InternetGateway", 0)
    sagemaker_template.resource_count_is("AWS::EC2::NatGateway", 0)


def test_runtime_interface_endpoint_with_private_dns(sagemaker_template: Template) -> None:
    sagemaker_template.has_resource_properties(
        "AWS::EC2::VPCEndpoint",
        {
            "ServiceName": "com.amazonaws.us-east-2.sagemaker.runtime",
            "VpcEndpointType": "Interface",
            "PrivateDnsEnabled": True,
        },
    )


def test_flow_logs_to_encrypted_group(sagemaker_template: Template) -> None:
    sagemaker_template.has_resource_properties(
        "AWS::EC2::FlowLog",
        {
            "ResourceType": "VPC",
            "TrafficType": "ALL",
            "LogDestinationType": "cloud-watch-logs",
        },
    )
    sagemaker_template.has_resource(
        "AWS::Logs::LogGroup",
        {
            "Properties": {"KmsKeyId": Match.any_value(), "RetentionInDays": 30},
            "DeletionPolicy": "RetainExceptOnCreate",
        },
    )


def test_endpoint_security_group_allows_https_from_vpc_only(sagemaker_template: Template) -> None:
    sagemaker_template.has_resource_properties(
        "AWS::EC2::SecurityGroup",
        {
            "SecurityGroupIngress": [
                Match.object_like(
                    {
                        "CidrIp": {"Fn::GetAtt": [Match.string_like_regexp("^NetworkVpc"), "CidrBlock"]},
                        "FromPort": 443,
                        "ToPort": 443,
                        "IpProtocol": "tcp",
                    }
                )
            ],
        },
    )


def test_existing_vpc_gets_endpoints_and_flow_logs_but_no_new_vpc() -> None:
    stack = Stack(App(), "Test")
    key = kms.Key(stack, "Key")
    vpc = import_vpc(
        stack,
        "Existing",
        vpc_id="vpc-0123456789abcdef0",
        vpc_cidr="10.0.0.0/16",
        availability_zones=["us-east-2a", "us-east-2b"],
        private_subnet_ids=["subnet-0aaaaaaaaaaaaaaa0", "subnet-0bbbbbbbbbbbbbbb0"],
        private_route_table_ids=["rtb-0aaaaaaaaaaaaaaa0", "rtb-0bbbbbbbbbbbbbbb0"],
    )
    Network(
        stack,
        "Network",
        key=key,
        flow_log_retention=logs.RetentionDays.ONE_WEEK,
        availability_zones=["us-east-2a", "us-east-2b"],
        cidr="10.0.0.0/16",
        interface_services=[ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_RUNTIME],
        existing_vpc=vpc,
    )
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::EC2::VPC", 0)
    template.has_resource_properties("AWS::EC2::FlowLog", {"ResourceId": "vpc-0123456789abcdef0"})
    template.has_resource_properties(
        "AWS::EC2::VPCEndpoint",
        {
            "VpcId": "vpc-0123456789abcdef0",
            "SubnetIds": ["subnet-0aaaaaaaaaaaaaaa0", "subnet-0bbbbbbbbbbbbbbb0"],
        },
    )


def test_s3_gateway_endpoint_on_the_private_route_tables(
    sagemaker_template: Template, ecs_template: Template
) -> None:
    for template in (sagemaker_template, ecs_template):
        template.has_resource_properties(
            "AWS::EC2::VPCEndpoint",
            {
                "VpcEndpointType": "Gateway",
                "ServiceName": {"Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, ".s3"]]},
                "RouteTableIds": Match.array_with(
                    [{"Ref": Match.string_like_regexp("^NetworkVpcPrivateSubnet1RouteTable")}]
                ),
            },
        )
