"""Every shipped environment synthesizes offline: no context lookup is left for the CLI to make."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Match, Template

from sonic_deploy.config import environment_names
from tests.conftest import (
    CONFIG_DIR,
    EditConfig,
    assembly_manifest,
    resources_of,
    synthesize_from,
    synthesized,
    template,
)


@pytest.mark.parametrize("env_name", environment_names(CONFIG_DIR))
def test_synthesizes_without_lookups(env_name: str) -> None:
    settings, stacks = synthesized(env_name)
    manifest = assembly_manifest(env_name)
    assert manifest.get("missing") is None, f"{env_name} needs AWS lookups at synth: {manifest['missing']}"
    zones = settings.environment.network.availability_zones
    assert all(stack.availability_zones == zones for stack in stacks.values())


def test_existing_vpc_synthesizes_both_routes_without_a_new_vpc(edit_config: EditConfig) -> None:
    existing = (
        '\n[network.existing_vpc]\nvpc_id = "vpc-0123456789abcdef0"\nvpc_cidr = "10.0.0.0/16"\n'
        'availability_zones = ["us-east-2a", "us-east-2b"]\n'
        'private_subnet_ids = ["subnet-0aaaaaaaaaaaaaaa0", "subnet-0bbbbbbbbbbbbbbb0"]\n'
        'private_route_table_ids = ["rtb-0aaaaaaaaaaaaaaa0", "rtb-0bbbbbbbbbbbbbbb0"]\n'
    )
    config = edit_config(
        "environments/dev.toml", "flow_log_retention_days = 30\n", "flow_log_retention_days = 30\n" + existing
    )
    stacks = synthesize_from(config)
    for stack in stacks.values():
        template = Template.from_stack(stack)
        template.resource_count_is("AWS::EC2::VPC", 0)
        template.has_resource_properties("AWS::EC2::FlowLog", {"ResourceId": "vpc-0123456789abcdef0"})
    Template.from_stack(stacks["ecs"]).has_resource_properties(
        "AWS::AutoScaling::AutoScalingGroup", {"VPCZoneIdentifier": ["subnet-0aaaaaaaaaaaaaaa0"]}
    )


@pytest.mark.parametrize("route", ["sagemaker", "ecs"])
def test_a_routes_template_is_the_same_without_the_other_routes(route: str) -> None:
    """What lets a test synthesize only the route it reads (`synthesize_from(..., routes=[route])`)."""
    alone = synthesize_from(CONFIG_DIR, routes=[route])
    assert list(alone) == [route]
    assert Template.from_stack(alone[route]).to_json() == template("dev", route).to_json()


KEPT_TYPES = {
    "AWS::KMS::Key",
    "AWS::ECR::Repository",
    "AWS::Logs::LogGroup",
    "AWS::EFS::FileSystem",
    "AWS::SecretsManager::Secret",
    "AWS::S3::Bucket",  # the ECS load balancer's access logs
}


@pytest.mark.parametrize("route", ["sagemaker", "ecs"])
def test_stateful_resources_are_kept_except_when_their_first_create_rolls_back(route: str) -> None:
    """A failed first deploy leaves nothing behind (no "already exists" on the retry); later ones keep data."""
    template = Template.from_stack(synthesized("dev")[1][route]).to_json()["Resources"]
    policies = {
        key: (resource["Type"], resource.get("DeletionPolicy"), resource.get("UpdateReplacePolicy"))
        for key, resource in template.items()
        if resource.get("DeletionPolicy") not in (None, "Delete")
    }
    assert policies, "no retained resources at all"
    assert {kind for kind, _, _ in policies.values()} <= KEPT_TYPES
    assert {(deletion, replace) for _, deletion, replace in policies.values()} == {
        ("RetainExceptOnCreate", "Retain")
    }


def test_both_routes_have_their_own_range_and_admit_the_client_vpcs(edit_config: EditConfig) -> None:
    """One client VPC (here 10.20.0.0/16) can be peered with both routes and reach each one's entry point."""
    config = edit_config(
        "environments/dev.toml",
        'cidr = "10.60.0.0/16"',
        'cidr = "10.60.0.0/16"\nclient_cidrs = ["10.20.0.0/16"]',
    )
    stacks = synthesize_from(config)
    ranges = {}
    for route, stack in stacks.items():
        template = Template.from_stack(stack)
        (vpc,) = template.find_resources("AWS::EC2::VPC").values()
        ranges[route] = vpc["Properties"]["CidrBlock"]
    assert ranges == {"sagemaker": "10.60.0.0/17", "ecs": "10.60.128.0/17"}
    Template.from_stack(stacks["sagemaker"]).has_resource_properties(
        "AWS::EC2::SecurityGroup",
        {
            "GroupDescription": "Interface endpoints: HTTPS from inside the VPC only",
            "SecurityGroupIngress": Match.array_with(
                [Match.object_like({"CidrIp": "10.20.0.0/16", "FromPort": 443, "ToPort": 443})]
            ),
        },
    )
    Template.from_stack(stacks["ecs"]).has_resource_properties(
        "AWS::EC2::SecurityGroup",
        {
            "GroupDescription": "Sonic API load balancer: clients inside the VPC only",
            "SecurityGroupIngress": Match.array_with(
                [Match.object_like({"CidrIp": "10.20.0.0/16", "FromPort": 80, "ToPort": 80})]
            ),
        },
    )


def test_the_ecs_routes_interface_endpoints_sit_in_its_one_zone(ecs_template: Template) -> None:
    endpoints = [
        e
        for e in resources_of(ecs_template, "AWS::EC2::VPCEndpoint").values()
        if "SubnetIds" in e["Properties"]
    ]
    assert endpoints
    subnets = resources_of(ecs_template, "AWS::EC2::Subnet")
    for endpoint in endpoints:
        zones = {
            subnets[s["Ref"]]["Properties"]["AvailabilityZone"] for s in endpoint["Properties"]["SubnetIds"]
        }
        assert zones == {"us-east-2a"}
