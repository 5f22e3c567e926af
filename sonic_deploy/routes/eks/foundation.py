"""The EKS route's foundation: the network, the placement group, the secrets, the image registry and the
cluster, on the stack's key (docs/eks.md, sections 1, 2 and 8)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs

from sonic_deploy.constructs.endpoint_policies import al2023_packages, ecr_image_layers
from sonic_deploy.constructs.network import Network
from sonic_deploy.constructs.placement import SingleAzPlacement
from sonic_deploy.constructs.registry import ImageRegistry, ImageSource
from sonic_deploy.constructs.sonic_secrets import SonicSecrets
from sonic_deploy.routes.eks.config import EksConfig
from sonic_deploy.routes.eks.constructs.cluster import SonicCluster

# What nodes and pods call most, kept off the NAT gateway (connected mode has one for the rest: licensing,
# model artefacts, the charts' images, EKS, STS and Pod Identity's eks-auth): images, secrets, metrics, logs.
EKS_ENDPOINTS = [
    ec2.InterfaceVpcEndpointAwsService.ECR,
    ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
    ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
    ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_MONITORING,
    ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
]


class Foundation:
    """Builds Network, Placement, Secrets, Registry and Cluster under the stack. `placement`: the VPC's
    (`network_props`); `images`: the registry's, by service name."""

    def __init__(
        self,
        stack: Stack,
        cfg: EksConfig,
        *,
        key: kms.IKey,
        flow_log_retention: logs.RetentionDays,
        log_retention_days: int,
        placement: Mapping[str, Any],
        images: Mapping[str, ImageSource],
        cluster_name: str,
    ) -> None:
        self.key = key
        self.network = Network(
            stack,
            "Network",
            key=key,
            flow_log_retention=flow_log_retention,
            interface_services=EKS_ENDPOINTS,
            egress=True,
            nat_gateways=1,
            endpoint_zones=[cfg.availability_zone],
            s3_reads=[ecr_image_layers(stack), al2023_packages(stack)],
            **placement,
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
        self.cluster = SonicCluster(
            stack,
            "Cluster",
            vpc=self.network.vpc,
            control_plane_subnets=self.network.private_subnets,
            node_subnets=[self.placement.subnet],
            key=key,
            version=cfg.kubernetes_version,
            name=cluster_name,
            existing=cfg.cluster.existing,
            security_group_id=cfg.cluster.security_group_id,
            system_instance_type=cfg.cluster.system_instance_type,
            system_nodes=cfg.cluster.system_nodes,
            admins=cfg.cluster.admins,
        )
