"""The EKS route's foundation: the network (network.py), the placement group, the secrets, the image registry
and the cluster, on the stack's key (docs/eks.md, sections 1, 2, 8 and 12)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import Acknowledgment, Stack, Validations
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs

from sonic_deploy.constructs.placement import SingleAzPlacement
from sonic_deploy.constructs.registry import ImageRegistry, ImageSource
from sonic_deploy.constructs.sonic_secrets import SonicSecrets
from sonic_deploy.routes.eks.config import EksConfig
from sonic_deploy.routes.eks.constructs.cluster import SonicCluster
from sonic_deploy.routes.eks.network import eks_network

ISOLATED_KUBECTL_WARNING = "@aws-cdk/aws-eks:isolatedSubnetsForKubectlPrivateSubnets"


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
        self.network = eks_network(
            stack, cfg, key=key, flow_log_retention=flow_log_retention, placement=placement
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
        if cfg.licence_mode == "air-gapped":
            # aws_eks_v2 orders the cluster after the VPC only: its kubectl functions reach AWS by the endpoints.
            self.cluster.node.add_dependency(self.network.s3_endpoint, *self.network.endpoints.values())
            # aws_eks_v2 warns of isolated subnets for the kubectl handler (aws-eks-v2/lib/cluster.js, 2.275).
            Validations.of(self.cluster.cluster).acknowledge(
                Acknowledgment(
                    id=f"Annotation::{ISOLATED_KUBECTL_WARNING}",
                    reason="air-gapped on purpose: the kubectl handler and its provider reach EKS, ECR, S3 and "
                    "Lambda through the VPC's endpoints (routes/eks/network.py); STS only serves IRSA",
                )
            )
