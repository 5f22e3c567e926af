"""Egress of the ECS route's security groups, in either licence mode: HTTPS, and the peers' own ports."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2

HTTPS = ec2.Port.tcp(443)


def https_only(security_group: ec2.SecurityGroup) -> None:
    """Allow HTTPS out of a group made with `allow_all_outbound=False`; its peers' ports come from
    `connections.allow_from/allow_to` (EFS's 2049, NATS's 4222, the services' ports), each to the peer's group.

    What calls out on 443: every task and GPU host calls the interface endpoints (ECR, logs, Secrets Manager,
    ECS, monitoring; EC2 too in air-gapped mode) and S3 through the gateway endpoint (image layers, the AL2023
    repositories). In connected mode the internet, through NAT, is called by the licence proxy (Cartesia's
    cloud: the only service Cartesia says calls out, docs.cartesia.ai/self-hosted/architecture) and by the API
    server and workers (GCS: the API server syncs voice migrations and the workers LoRA checkpoints from the
    customer's bucket, docs.cartesia.ai/self-hosted/provisioned-resources), and the GPU hosts' EC2 calls go
    there too. No container needs another port or protocol out, so none is open.

    Why 0.0.0.0/0 and not the endpoints' group and S3's prefix list: S3's gateway is reachable only by its
    AWS-managed prefix list, whose id differs per Region and which neither CloudFormation nor the gateway
    endpoint resource returns; finding it needs an AWS call (a context lookup at synth, or a custom resource at
    deploy). Air-gapped, the isolated subnets route only the VPC and the S3 gateway, so 443 to 0.0.0.0/0 reaches
    exactly those. Connected, the private subnets route the rest to NAT: NATS, the scraper and the GPU hosts
    could reach the internet on 443 though Cartesia documents no need for it (their groups say so). DNS goes to
    the VPC resolver, which security groups do not filter. An existing VPC is routed as its owner routes it.
    """
    security_group.add_egress_rule(
        ec2.Peer.any_ipv4(),
        HTTPS,
        "HTTPS to the VPC's endpoints and S3's gateway (and, connected, the internet through NAT)",
    )
