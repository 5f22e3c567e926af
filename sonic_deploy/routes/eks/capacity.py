"""The EKS route's GPU capacity: Karpenter, installed by the stack in either way in, and its node class and
pools, one GPU type each, in the route's AZ and placement group (docs/eks.md, section 1)."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Stack
from aws_cdk import aws_eks_v2 as eks

from sonic_deploy.routes.eks.config import EksConfig
from sonic_deploy.routes.eks.constructs.cluster import SYSTEM_NODES
from sonic_deploy.routes.eks.constructs.karpenter import KarpenterController
from sonic_deploy.routes.eks.foundation import Foundation
from sonic_deploy.routes.eks.manifests import GpuNodes, gpu_nodes

GPU_NODES = "sonic-gpu"


class Capacity:
    """Builds Karpenter and GpuNodes, the EC2NodeClass and NodePools applied once Karpenter's CRDs are in."""

    def __init__(self, stack: Stack, cfg: EksConfig, base: Foundation, *, tags: Mapping[str, str]) -> None:
        cluster = base.cluster
        self.karpenter = KarpenterController(
            stack,
            "Karpenter",
            cluster=cluster.cluster,
            cluster_name=cluster.name,
            key=base.key,
            system_node_selector=SYSTEM_NODES,
            # The stack gives vpc-cni no Pod Identity of its own: on Karpenter's nodes it runs on the node role.
            vpc_cni_uses_node_role=True,
            mirror=cfg.mirror,
            isolated_vpc=cfg.licence_mode == "air-gapped",
        )
        self.karpenter.node.add_dependency(*cluster.ready)
        self.manifest = eks.KubernetesManifest(
            stack,
            "GpuNodes",
            cluster=cluster.cluster,
            manifest=gpu_nodes(
                GpuNodes(
                    name=GPU_NODES,
                    ami_alias=cfg.capacity.ami,
                    instance_profile=self.karpenter.instance_profile.instance_profile_name,
                    subnet_id=base.placement.subnet.subnet_id,
                    security_group_ids=(cluster.cluster.cluster_security_group_id,),
                    placement_group_name=base.placement.placement_group.placement_group_name,
                    # The account's EBS key, as the ECS route's GPU hosts: the stack's would need EC2 and
                    # Karpenter in its policy (Karpenter's troubleshooting: nodes die on a key they cannot use).
                    kms_key_arn=None,
                    root_volume_gib=cfg.root_volume_gib,
                    instance_types=tuple(cfg.instance_types),
                    max_gpus=cfg.max_workers,
                    availability_zone=cfg.availability_zone,
                    tags=dict(tags),
                )
            ),
        )
        self.manifest.node.add_dependency(self.karpenter.chart)
