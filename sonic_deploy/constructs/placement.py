"""One AZ and a cluster placement group: the shortest network path between GPU instances."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import ArnFormat, Stack
from aws_cdk import aws_ec2 as ec2
from constructs import Construct


class SingleAzPlacement(Construct):
    """A cluster placement group and the one private subnet, in `availability_zone`, that everything
    latency-critical (GPU instances, API server, load balancer) is pinned to.

    The trade: no multi-AZ resilience (the Compute SLA's 99.99% needs two AZs) for the lowest latency.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, subnets: Sequence[ec2.ISubnet], availability_zone: str
    ) -> None:
        super().__init__(scope, construct_id)
        in_zone = [subnet for subnet in subnets if subnet.availability_zone == availability_zone]
        if len(in_zone) != 1:
            # The config loader checks the AZ against the VPC first; this guards direct construct use.
            raise ValueError(f"expected one private subnet in {availability_zone}, found {len(in_zone)}")
        self.availability_zone = availability_zone
        self.subnet = in_zone[0]
        self.subnets = ec2.SubnetSelection(subnets=[self.subnet])
        self.placement_group = ec2.PlacementGroup(
            self, "PlacementGroup", strategy=ec2.PlacementGroupStrategy.CLUSTER
        )

    @property
    def placement_group_arn(self) -> str:
        """The group's ARN (EC2's format, `arn:aws:ec2:<region>:<account>:placement-group/<name>`, Service
        Authorization Reference, Amazon EC2 resource types): what CreateCapacityReservation's
        PlacementGroupArn takes to reserve capacity in it."""
        return Stack.of(self).format_arn(
            service="ec2",
            resource="placement-group",
            resource_name=self.placement_group.placement_group_name,
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )
