"""Egress of the ECS route's own security groups (services, GPU hosts, scraper) in each licence mode."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Template

from tests.conftest import rendered, resources_of

# The groups SonicService, GpuCapacity and SonicMetrics make, by logical-id prefix.
GROUPS = (
    "SonicApiServerSecurityGroup",
    "SonicGpuWorkerSecurityGroup",
    "SonicNatsSecurityGroup",
    "SonicLicenceProxySecurityGroup",
    "GpuCapacitySecurityGroup",
    "MetricsScraperSecurityGroup",
)
HTTPS_OUT = {"CidrIp": "0.0.0.0/0", "IpProtocol": "tcp", "FromPort": 443, "ToPort": 443}


def _group(template: Template, prefix: str) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (k, g) for k, g in resources_of(template, "AWS::EC2::SecurityGroup").items() if k.startswith(prefix)
    ]
    return found


def _egress_to_groups(template: Template, prefix: str) -> set[tuple[str, int]]:
    """(destination group's logical-id prefix, port) of each egress rule from the group."""
    source, _ = _group(template, prefix)
    names = {k: k[:-8] for k in resources_of(template, "AWS::EC2::SecurityGroup")}
    return {
        (
            names[rule["Properties"]["DestinationSecurityGroupId"]["Fn::GetAtt"][0]],
            rule["Properties"]["FromPort"],
        )
        for rule in resources_of(template, "AWS::EC2::SecurityGroupEgress").values()
        if rule["Properties"]["GroupId"] == {"Fn::GetAtt": [source, "GroupId"]}
        and "DestinationSecurityGroupId" in rule["Properties"]
    }


# Groups whose containers Cartesia documents calling the internet (constructs/egress.py says which and why).
CALL_THE_INTERNET = (
    "SonicApiServerSecurityGroup",
    "SonicGpuWorkerSecurityGroup",
    "SonicLicenceProxySecurityGroup",
)
AWS_ONLY = tuple(prefix for prefix in GROUPS if prefix not in CALL_THE_INTERNET)
LOOKUP = "S3PrefixListLookup"


def _prefix_list_egress(template: Template, prefix: str) -> list[dict[str, Any]]:
    source, _ = _group(template, prefix)
    return [
        {k: v for k, v in rule["Properties"].items() if k not in ("Description", "GroupId")}
        for rule in resources_of(template, "AWS::EC2::SecurityGroupEgress").values()
        if rule["Properties"]["GroupId"] == {"Fn::GetAtt": [source, "GroupId"]}
        and "DestinationPrefixListId" in rule["Properties"]
    ]


@pytest.mark.parametrize("prefix", GROUPS)
def test_air_gapped_egress_is_https_alone(air_gapped: Template, prefix: str) -> None:
    """The isolated subnets route 443 only to the endpoints and S3's gateway: no lookup is needed."""
    _, group = _group(air_gapped, prefix)
    (rule,) = group["Properties"]["SecurityGroupEgress"]
    assert {k: v for k, v in rule.items() if k != "Description"} == HTTPS_OUT
    assert _prefix_list_egress(air_gapped, prefix) == []
    assert not resources_of(air_gapped, "Custom::AWS")


@pytest.mark.parametrize("prefix", CALL_THE_INTERNET)
def test_connected_internet_callers_get_https_alone(ecs_template: Template, prefix: str) -> None:
    """The licence proxy (Cartesia's cloud) and the API server and workers (GCS) reach the internet through
    NAT on TCP 443 only."""
    _, group = _group(ecs_template, prefix)
    (rule,) = group["Properties"]["SecurityGroupEgress"]
    assert {k: v for k, v in rule.items() if k != "Description"} == HTTPS_OUT


@pytest.mark.parametrize("prefix", AWS_ONLY)
def test_connected_aws_only_groups_cannot_reach_the_internet(ecs_template: Template, prefix: str) -> None:
    """NATS, the GPU hosts and the scraper: 443 to the interface endpoints' group and S3's prefix list, no
    address range at all."""
    _, group = _group(ecs_template, prefix)
    (lookup,) = [k for k in resources_of(ecs_template, "Custom::AWS") if k.startswith(LOOKUP)]
    (endpoints,) = [
        k
        for k in resources_of(ecs_template, "AWS::EC2::SecurityGroup")
        if k.startswith("NetworkEndpointSecurityGroup")
    ]
    assert [
        {k: v for k, v in r.items() if k != "Description"} for r in group["Properties"]["SecurityGroupEgress"]
    ] == [
        {
            "DestinationSecurityGroupId": {"Fn::GetAtt": [endpoints, "GroupId"]},
            "IpProtocol": "tcp",
            "FromPort": 443,
            "ToPort": 443,
        }
    ]
    assert _prefix_list_egress(ecs_template, prefix) == [
        {
            "DestinationPrefixListId": {"Fn::GetAtt": [lookup, "PrefixLists.0.PrefixListId"]},
            "IpProtocol": "tcp",
            "FromPort": 443,
            "ToPort": 443,
        }
    ]
    rules = [*resources_of(ecs_template, "AWS::EC2::SecurityGroupEgress").values()]
    source, _ = _group(ecs_template, prefix)
    assert not [
        r
        for r in rules
        if r["Properties"]["GroupId"] == {"Fn::GetAtt": [source, "GroupId"]} and "CidrIp" in r["Properties"]
    ]


def test_connected_ec2_calls_stay_in_the_vpc(ecs_template: Template, air_gapped: Template) -> None:
    """The GPU agent's DescribeTags and the scraper's DescribeInstances go to EC2's endpoint in either mode."""
    for template in (ecs_template, air_gapped):
        services = [
            rendered(e["Properties"]["ServiceName"])
            for e in resources_of(template, "AWS::EC2::VPCEndpoint").values()
        ]
        assert sum(name.endswith(".ec2") for name in services) == 1, services


def test_the_lookup_asks_ec2_for_the_regions_s3_list_and_may_do_nothing_else(ecs_template: Template) -> None:
    (lookup,) = [v for k, v in resources_of(ecs_template, "Custom::AWS").items() if k.startswith(LOOKUP)]
    create = rendered(lookup["Properties"]["Create"])
    assert '"action":"describeManagedPrefixLists","service":"EC2"' in create
    assert '"Name":"prefix-list-name","Values":["com.amazonaws.CFN_Ref.s3"]' in create
    assert lookup["Properties"]["Update"] == lookup["Properties"]["Create"]
    assert "Delete" not in lookup["Properties"]  # nothing to undo
    assert lookup["Properties"]["InstallLatestAwsSdk"] is False  # no npm download at deploy time
    (policy,) = [
        v
        for k, v in resources_of(ecs_template, "AWS::IAM::ManagedPolicy").items()
        if k.startswith("S3PrefixList")
    ]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    (logs_group,) = [
        k for k in resources_of(ecs_template, "AWS::Logs::LogGroup") if k.startswith("S3PrefixListLogs")
    ]
    assert [(s["Action"], s["Resource"]) for s in statements] == [
        ("ec2:DescribeManagedPrefixLists", "*"),
        (["logs:CreateLogStream", "logs:PutLogEvents"], {"Fn::GetAtt": [logs_group, "Arn"]}),
    ]
    (role,) = [k for k in resources_of(ecs_template, "AWS::IAM::Role") if k.startswith("S3PrefixListRole")]
    assert policy["Properties"]["Roles"] == [{"Ref": role}]
    assert not [
        p
        for p in resources_of(ecs_template, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
    ]
    group = resources_of(ecs_template, "AWS::Logs::LogGroup")[logs_group]["Properties"]
    assert "KmsKeyId" in group and group["RetentionInDays"] > 0


def test_connected_peers_on_their_ports(ecs_template: Template) -> None:
    """Egress closed in connected mode too: each peer's port is opened to that peer's group only."""
    for client in ("SonicApiServerSecurityGroup", "SonicGpuWorkerSecurityGroup"):
        assert _egress_to_groups(ecs_template, client) == {
            ("SonicNatsSecurityGroup", 4222),
            ("SonicLicenceProxySecurityGroup", 8080),
        }
    assert _egress_to_groups(ecs_template, "SonicNatsSecurityGroup") == {("SonicNatsSecurityGroup", 6222)}
    assert _egress_to_groups(ecs_template, "SonicLicenceProxySecurityGroup") == set()
    assert _egress_to_groups(ecs_template, "MetricsScraperSecurityGroup") == {
        ("SonicGpuWorkerSecurityGroup", 8080),
        ("SonicApiServerSecurityGroup", 5000),
    }


def test_air_gapped_peers_on_their_ports(air_gapped: Template) -> None:
    to_peers = {
        "SonicNatsSecurityGroup": 4222,
        "SonicLicenceProxySecurityGroup": 8080,
    }
    for client in ("SonicApiServerSecurityGroup", "SonicGpuWorkerSecurityGroup"):
        assert _egress_to_groups(air_gapped, client) == set(to_peers.items())
    assert _egress_to_groups(air_gapped, "SonicLicenceProxySecurityGroup") == {
        ("LicenceStoreFileSystemEfsSecurityGroup", 2049)
    }
    assert _egress_to_groups(air_gapped, "MetricsScraperSecurityGroup") == {
        ("SonicGpuWorkerSecurityGroup", 8080),
        ("SonicApiServerSecurityGroup", 5000),
    }
    # The NATS servers dial each other's route port (the cluster), and nothing else.
    assert _egress_to_groups(air_gapped, "SonicNatsSecurityGroup") == {("SonicNatsSecurityGroup", 6222)}
    assert _egress_to_groups(air_gapped, "GpuCapacitySecurityGroup") == set()
