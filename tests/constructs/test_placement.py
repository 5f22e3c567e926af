"""SingleAzPlacement on a bare stack: the one private subnet of its AZ, a cluster placement group and its ARN."""

from __future__ import annotations

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

from sonic_deploy.constructs.placement import SingleAzPlacement
from tests.conftest import rendered, resources_of

ZONES = ("us-east-2a", "us-east-2b")


def _stack_and_subnets() -> tuple[Stack, list[ec2.ISubnet]]:
    stack = Stack(App(), "Test", env=Environment(account="111111111111", region="us-east-2"))
    subnets = [
        ec2.Subnet.from_subnet_attributes(stack, zone, subnet_id=f"subnet-{zone}", availability_zone=zone)
        for zone in ZONES
    ]
    return stack, subnets


def test_the_one_subnet_of_its_zone_and_a_cluster_placement_group() -> None:
    stack, subnets = _stack_and_subnets()
    placement = SingleAzPlacement(stack, "Placement", subnets=subnets, availability_zone="us-east-2b")
    assert placement.subnet.subnet_id == "subnet-us-east-2b"
    assert placement.subnets.subnets == [placement.subnet]
    (group_id, group), *others = resources_of(Template.from_stack(stack), "AWS::EC2::PlacementGroup").items()
    assert others == [] and group["Properties"] == {"Strategy": "cluster"}
    arn = stack.resolve(placement.placement_group_arn)
    assert rendered(arn) == "arn:CFN_Ref:ec2:us-east-2:111111111111:placement-group/CFN_Fn_GetAtt"
    assert arn["Fn::Join"][1][-1] == {"Fn::GetAtt": [group_id, "GroupName"]}


def test_a_zone_without_exactly_one_subnet_is_refused() -> None:
    stack, subnets = _stack_and_subnets()
    with pytest.raises(ValueError, match="expected one private subnet in us-east-2c, found 0"):
        SingleAzPlacement(stack, "Placement", subnets=subnets, availability_zone="us-east-2c")
