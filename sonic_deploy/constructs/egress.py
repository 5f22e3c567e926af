"""Egress of the ECS route's security groups in air-gapped mode: HTTPS, and the peers' own ports."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2

HTTPS = ec2.Port.tcp(443)


def https_only(security_group: ec2.SecurityGroup) -> None:
    """Allow HTTPS out of a group made with `allow_all_outbound=False`; its peers' ports come from
    `connections.allow_from/allow_to` (EFS's 2049, NATS's 4222, the services' ports), each to the peer's group.

    Why HTTPS to 0.0.0.0/0 and not to the endpoints' group and S3's prefix list: what a task or GPU host calls
    on 443 is the interface endpoints (ECR, logs, Secrets Manager, ECS, monitoring, EC2) and S3 through the
    gateway endpoint (image layers; the AL2023 repositories). S3's gateway is reachable only by its AWS-managed
    prefix list, whose id differs per Region and which neither CloudFormation nor the gateway endpoint resource
    returns; finding it needs an AWS call (a context lookup at synth, or a custom resource at deploy). In the
    isolated subnets air-gapped mode builds, the route tables have the VPC's local route and the S3 gateway's
    and nothing else (no internet or NAT gateway), so 443 to 0.0.0.0/0 reaches exactly those. DNS goes to the
    VPC resolver, which security groups do not filter. An existing VPC (`network.existing_vpc`) is routed as
    its owner routes it.
    """
    security_group.add_egress_rule(
        ec2.Peer.any_ipv4(),
        HTTPS,
        "HTTPS to the VPC's interface endpoints and S3's gateway: the isolated subnets route nothing else",
    )
