"""Network: private subnets in two AZs, interface endpoints, flow logs; or an existing VPC."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Match, Template

from sonic_deploy.config import Settings
from sonic_deploy.constructs.endpoint_policies import NO_ENDPOINT_POLICY, interface_endpoint_policy
from sonic_deploy.constructs.network import Network, import_vpc
from sonic_deploy.in_vpc import protocol
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


def _endpoint_group(template: Template) -> dict[str, Any]:
    groups = resources_of(template, "AWS::EC2::SecurityGroup")
    return dict(
        next(g for k, g in groups.items() if k.startswith("NetworkEndpointSecurityGroup"))["Properties"]
    )


def test_endpoint_security_group_allows_https_from_vpc_only(
    sagemaker_template: Template, ecs_template: Template, dev_settings: Settings
) -> None:
    for route, template in (("sagemaker", sagemaker_template), ("ecs", ecs_template)):
        group = _endpoint_group(template)
        # The range config states, not the VPC's CidrBlock attribute: rules that read ranges can read it.
        assert group["SecurityGroupIngress"] == [
            {
                "CidrIp": dev_settings.route_cidr(route),
                "Description": "HTTPS from the VPC",
                "FromPort": 443,
                "IpProtocol": "tcp",
                "ToPort": 443,
            }
        ]
        # No egress: CDK's placeholder rule that matches no traffic, and nothing else.
        assert [rule["CidrIp"] for rule in group["SecurityGroupEgress"]] == ["255.255.255.255/32"]


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


def _endpoints(template: Template, endpoint_type: str) -> list[dict[str, Any]]:
    return [
        dict(e["Properties"])
        for e in resources_of(template, "AWS::EC2::VPCEndpoint").values()
        if e["Properties"]["VpcEndpointType"] == endpoint_type
    ]


def _statements(endpoint: dict[str, Any]) -> list[dict[str, Any]]:
    return list(endpoint["PolicyDocument"]["Statement"])


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def test_s3_gateway_endpoint_lets_through_reads_and_the_probes_writes_only(
    sagemaker_template: Template, ecs_template: Template, air_gapped: Template
) -> None:
    for template in (sagemaker_template, ecs_template, air_gapped):
        (endpoint,) = _endpoints(template, "Gateway")
        statements = {s["Sid"]: s for s in _statements(endpoint)}
        assert all(s["Effect"] == "Allow" for s in statements.values())
        # The one write is the probe's, into its own bucket's runs (what a task writes there: ready/,
        # results/, failed/; and what the runner writes, from inside the VPC: run.json, commands/, stop.json,
        # transcripts.txt): a task cannot copy data out elsewhere.
        writes = {
            sid for sid, s in statements.items() if set(_actions(s)) - {"s3:GetObject", "s3:ListBucket"}
        }
        assert writes == {"WriteTheProbeBucket"}
        probe = statements["WriteTheProbeBucket"]
        assert _actions(probe) == ["s3:PutObject"]
        (bucket,) = (i for i in resources_of(template, "AWS::S3::Bucket") if i.startswith("ProbeBucket"))
        assert probe["Resource"] == [
            {"Fn::Join": ["", [{"Fn::GetAtt": [bucket, "Arn"]}, f"/runs/*/{pattern}"]]}
            for pattern in sorted([*protocol.TASK_KEYS, *protocol.RUNNER_KEYS])
        ]
        assert probe["Condition"] == {"StringEquals": {"aws:PrincipalAccount": {"Ref": "AWS::AccountId"}}}
        own = statements["ReadThisAccountsBuckets"]
        assert own["Condition"] == {"StringEquals": {"aws:ResourceAccount": {"Ref": "AWS::AccountId"}}}
    # The ECS route in either licence mode: other accounts' objects only in the two AWS-owned buckets.
    for template in (ecs_template, air_gapped):
        (ecs_endpoint,) = _endpoints(template, "Gateway")
        aws_owned = next(s for s in _statements(ecs_endpoint) if s["Sid"] == "ReadAwsOwnedObjects")
        assert sorted(aws_owned["Resource"]) == [
            "arn:aws:s3:::al2023-repos-us-east-2-de612dc2/*",  # the GPU hosts' CloudWatch agent package
            "arn:aws:s3:::prod-us-east-2-starport-layer-bucket/*",  # ECR's image layers
        ]
        assert "ListAwsOwnedBuckets" not in {s["Sid"] for s in _statements(ecs_endpoint)}


def test_where_s3_is_reached_through_the_gateway_anyway_any_object_may_be_read(
    sagemaker_template: Template,
) -> None:
    """SageMaker (the model data's bucket is not named): reads and lists of any bucket, still no write."""
    for template in (sagemaker_template,):
        (endpoint,) = _endpoints(template, "Gateway")
        statements = {s["Sid"]: s for s in _statements(endpoint)}
        assert "arn:aws:s3:::*/*" in statements["ReadAwsOwnedObjects"]["Resource"]
        assert statements["ListAwsOwnedBuckets"]["Resource"] == "arn:aws:s3:::*"
        assert _actions(statements["ListAwsOwnedBuckets"]) == ["s3:ListBucket"]


def test_interface_endpoints_let_through_this_accounts_principals_only(
    sagemaker_template: Template, ecs_template: Template
) -> None:
    seen = set()
    for template in (sagemaker_template, ecs_template):
        for endpoint in _endpoints(template, "Interface"):
            service = json.dumps(endpoint["ServiceName"])
            if any(f".{name}" in service for name in NO_ENDPOINT_POLICY):
                assert "PolicyDocument" not in endpoint  # the service refuses one
                continue
            seen.add(service)
            for statement in _statements(endpoint):
                assert statement["Sid"] and statement["Effect"] == "Allow"
                assert statement["Condition"] == {
                    "StringEquals": {"aws:PrincipalAccount": {"Ref": "AWS::AccountId"}}
                }
                assert "*" not in _actions(statement)
    assert len(seen) == 8  # sagemaker.runtime; ecr.api, ecr.dkr, logs, monitoring, secretsmanager, ecs, ec2


def test_repositories_secrets_and_endpoints_of_this_account_only() -> None:
    stack = Stack(App(), "Test", env={"account": "111122223333", "region": "us-east-2"})
    here = f"arn:{stack.partition}"

    def resources(service: str) -> set[str]:
        found = [s.to_json()["Resource"] for s in interface_endpoint_policy(stack, service)]
        return {r for resource in found for r in ([resource] if isinstance(resource, str) else resource)}

    assert resources("ecr.dkr") == {"*", f"{here}:ecr:us-east-2:111122223333:repository/*"}
    assert resources("secretsmanager") == {f"{here}:secretsmanager:us-east-2:111122223333:secret:*"}
    assert resources("sagemaker.runtime") == {f"{here}:sagemaker:us-east-2:111122223333:endpoint/*"}


def test_an_interface_endpoint_without_a_chosen_policy_is_refused() -> None:
    with pytest.raises(
        ValueError, match="no endpoint policy chosen for interface endpoint 'kinesis-streams'"
    ):
        interface_endpoint_policy(Stack(App(), "Test"), "kinesis-streams")


def test_public_subnets_hold_nat_only_and_assign_no_public_ips(ecs_template: Template) -> None:
    subnets = resources_of(ecs_template, "AWS::EC2::Subnet")
    assert any(k.startswith("NetworkVpcPublicSubnet") for k in subnets)  # dev's ECS route has NAT
    assert all(s["Properties"]["MapPublicIpOnLaunch"] is False for s in subnets.values())


def test_restrict_default_sg_function_has_its_checkov_skips(
    sagemaker_template: Template, ecs_template: Template
) -> None:
    for template in (sagemaker_template, ecs_template):
        (handler,) = [
            f
            for k, f in resources_of(template, "AWS::Lambda::Function").items()
            if k.startswith("CustomVpcRestrictDefaultSGCustomResourceProviderHandler")
        ]
        assert "DependsOn" not in handler  # its GetAtt of the role orders it (cfn-lint W3005)
        skips = handler["Metadata"]["checkov"]["skip"]
        assert {s["id"] for s in skips} == {"CKV_AWS_115", "CKV_AWS_116", "CKV_AWS_117"}
        assert all(s["comment"] for s in skips)
