"""The ECS route's foundation: the network, the private way to AWS, the placement, the secrets and the image
registry, on the stack's key.

A plain class, not a Construct: it builds its children straight under the stack, with the ids they have
always had, so their construct paths (and so their logical IDs) do not change."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs

from sonic_deploy.config.schema import TurnHop
from sonic_deploy.constructs.egress import PrivateAws, S3PrefixList
from sonic_deploy.constructs.endpoint_policies import al2023_packages, ecr_image_layers
from sonic_deploy.constructs.network import Network
from sonic_deploy.constructs.placement import SingleAzPlacement
from sonic_deploy.constructs.probe_task import turn_hop_endpoints
from sonic_deploy.constructs.registry import ImageRegistry, ImageSource
from sonic_deploy.constructs.sonic_secrets import SonicSecrets
from sonic_deploy.routes.ecs.config import EcsConfig

# AWS service endpoints the tasks need without internet (and, in air-gapped mode, with no egress at all).
ECS_ENDPOINTS = [
    ec2.InterfaceVpcEndpointAwsService.ECR,
    ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
    ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_MONITORING,
    ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
    ec2.InterfaceVpcEndpointAwsService.ECS,
    ec2.InterfaceVpcEndpointAwsService.ECS_AGENT,
    ec2.InterfaceVpcEndpointAwsService.ECS_TELEMETRY,
    # The GPU agent resolves its Auto Scaling group's name (DescribeTags), the scraper its targets.
    ec2.InterfaceVpcEndpointAwsService.EC2,
]


class Foundation:
    """Builds Network, S3PrefixList (connected), Placement, Secrets and Registry under the stack, in that
    order. `placement`: the VPC's (`network_props`); `images`: the registry's, by service name."""

    def __init__(
        self,
        stack: Stack,
        cfg: EcsConfig,
        *,
        key: kms.IKey,
        flow_log_retention: logs.RetentionDays,
        log_retention: logs.RetentionDays,
        log_retention_days: int,
        turn_hops: Sequence[TurnHop],
        placement: Mapping[str, Any],
        images: Mapping[str, ImageSource],
    ) -> None:
        self.key = key
        self.connected = cfg.licence_mode == "connected"
        self.network = Network(
            stack,
            "Network",
            key=key,
            flow_log_retention=flow_log_retention,
            # Without NAT, the probe task calls the turn hops of `[probe] turn_hops` here (connected, through NAT).
            interface_services=ECS_ENDPOINTS + ([] if self.connected else turn_hop_endpoints(turn_hops)),
            egress=self.connected,
            nat_gateways=cfg.nat_gateways,
            # The route's tasks and instances are in one AZ (endpoints elsewhere would be paid for idle); a
            # fallback AZ's overflow workers reach these across AZs, billed as cross-AZ data while they run.
            endpoint_zones=[cfg.availability_zone],
            # Image layers, and the GPU hosts' CloudWatch agent package (SonicMetrics), in either mode: the
            # containers' own downloads are from GCS (Cartesia's "Provisioned resources": the API server's
            # migrations, the workers' LoRAs), through NAT, not S3; this account's buckets are read by role.
            s3_reads=[ecr_image_layers(stack), al2023_packages(stack)],
            **placement,
        )
        # Connected, what has no documented internet need reaches AWS only (constructs/egress.py).
        self.private_aws = (
            PrivateAws(
                self.network.endpoint_security_group,
                S3PrefixList(stack, "S3PrefixList", key=key, log_retention=log_retention).prefix_list_id,
            )
            if self.connected
            else None
        )
        self.placement = SingleAzPlacement(
            stack, "Placement", subnets=self.network.private_subnets, availability_zone=cfg.availability_zone
        )
        self.secrets = SonicSecrets(
            stack,
            "Secrets",
            api_key_name=cfg.secrets.api_key,
            registry_credentials_name=cfg.secrets.registry_credentials,
            create=cfg.secrets.create,
            key=key,
        )
        self.registry = ImageRegistry(
            stack,
            "Registry",
            key=key,
            registry_credentials=self.secrets.registry_credentials,
            copy_images=cfg.copy_images,
            copy_log_retention_days=log_retention_days,
            copy_memory_mib=cfg.image_copy_memory_mib,
            reuse_repositories=cfg.reuse_repositories,
            images=images,
        )
