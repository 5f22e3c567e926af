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
@pytest.mark.parametrize("mode", ["connected", "air-gapped"])
def test_egress_is_https_and_named_peers_in_either_mode(
    ecs_template: Template, air_gapped: Template, mode: str, prefix: str
) -> None:
    """Connected too: no all-protocol rule; the licence proxy (Cartesia's cloud) and the API server and
    workers (GCS) reach the internet through NAT on TCP 443 only."""
    _, group = _group(ecs_template if mode == "connected" else air_gapped, prefix)
    (rule,) = group["Properties"]["SecurityGroupEgress"]
    assert {k: v for k, v in rule.items() if k != "Description"} == HTTPS_OUT


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
