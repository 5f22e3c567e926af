"""Egress of the ECS route's own security groups (services, GPU hosts, scraper) in each licence mode."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.assertions import Template

from tests.conftest import resources_of

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
    }


@pytest.mark.parametrize("prefix", GROUPS)
def test_connected_mode_keeps_open_egress(ecs_template: Template, prefix: str) -> None:
    """The licence proxy calls Cartesia's cloud through NAT; where else the containers call is not documented."""
    _, group = _group(ecs_template, prefix)
    assert group["Properties"]["SecurityGroupEgress"] == [
        {"CidrIp": "0.0.0.0/0", "Description": "Allow all outbound traffic by default", "IpProtocol": "-1"}
    ]


@pytest.mark.parametrize("prefix", GROUPS)
def test_air_gapped_egress_is_https_and_named_peers(air_gapped: Template, prefix: str) -> None:
    _, group = _group(air_gapped, prefix)
    (rule,) = group["Properties"]["SecurityGroupEgress"]
    assert {k: v for k, v in rule.items() if k != "Description"} == HTTPS_OUT


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
