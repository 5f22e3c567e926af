"""The EKS route's VPC: egress and NAT from the licence mode, the interface endpoints the cluster needs in each
mode, and what their policies let through beyond the shared ones (docs/eks.md, section 12, "Air-gapped:
the network and Karpenter")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs

from sonic_deploy.constructs.endpoint_policies import al2023_packages, ecr_image_layers, this_accounts
from sonic_deploy.constructs.network import Network
from sonic_deploy.routes.eks.addon_registry import ADD_ON_REGISTRY_ACCOUNTS
from sonic_deploy.routes.eks.config import EksConfig
from sonic_deploy.routes.eks.endpoints import needed

# EC2 writes of the cluster's callers beyond ec2:Describe*: Karpenter's (karpenter_policy.py), vpc-cni's with the
# node role (AmazonEKS_CNI_Policy), the load balancer controller's ingress rules (add_on_policies.py), the EBS
# CSI driver's volumes (licence_storage.py); docs/eks.md, "Air-gapped: the network and Karpenter".
CLUSTER_EC2_WRITES = (
    "ec2:CreateFleet",
    "ec2:CreateLaunchTemplate",
    "ec2:CreateTags",
    "ec2:DeleteLaunchTemplate",
    "ec2:RunInstances",
    "ec2:TerminateInstances",
    "ec2:*NetworkInterface",
    "ec2:*PrivateIpAddresses",
    "ec2:ModifyNetworkInterfaceAttribute",
    "ec2:AuthorizeSecurityGroupIngress",
    "ec2:RevokeSecurityGroupIngress",
    "ec2:CreateVolume",
    "ec2:AttachVolume",
    "ec2:DetachVolume",
    "ec2:ModifyVolume",
    "ec2:DeleteVolume",
)
PULLS = ("ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer")


def interface_services(cfg: EksConfig) -> list[ec2.InterfaceVpcEndpointAwsService]:
    """The interface endpoints the route's licence mode needs in its VPC (endpoints.py)."""
    return [ec2.InterfaceVpcEndpointAwsService(name) for name in needed(cfg.licence_mode)]


def eks_network(
    stack: Stack,
    cfg: EksConfig,
    *,
    key: kms.IKey,
    flow_log_retention: logs.RetentionDays,
    placement: Mapping[str, Any],
) -> Network:
    """`Network` under the stack for the route's licence mode, its endpoints in the route's AZ. An existing VPC
    gets none: it has its own, and a second with private DNS would be refused (preflight checks they are there)."""
    connected = cfg.licence_mode == "connected"
    network = Network(
        stack,
        "Network",
        key=key,
        flow_log_retention=flow_log_retention,
        interface_services=[] if "existing_vpc" in placement else interface_services(cfg),
        egress=connected,
        nat_gateways=cfg.nat_gateways,
        endpoint_zones=[cfg.availability_zone],
        s3_reads=[ecr_image_layers(stack), al2023_packages(stack)],
        **placement,
    )
    # Either mode: the kubectl provider's functions are in the VPC, and S3 is reached through the gateway.
    network.allow_custom_resource_responses()
    endpoints = network.endpoints
    if not endpoints:
        return network
    # KEDA's aws-cloudwatch triggers read through the monitoring endpoint (constructs/add_on_policies.py).
    endpoints["monitoring"].add_to_policy(
        this_accounts("ReadScalingMetricsNoResource", ["cloudwatch:GetMetricData"], ["*"])
    )
    # Every node pulls the add-ons' images (vpc-cni, kube-proxy, CoreDNS, the Pod Identity Agent) from EKS's
    # registry account, not this one (EKS guide, workloads/add-ons-images.adoc).
    registry = ADD_ON_REGISTRY_ACCOUNTS[stack.region]
    add_ons = f"arn:{stack.partition}:ecr:{stack.region}:{registry}:repository/*"
    for service in ("ecr.api", "ecr.dkr"):
        endpoints[service].add_to_policy(this_accounts("PullEksAddOnImages", PULLS, [add_ons]))
    if not connected:
        # RunInstances also names AWS's AMIs and snapshots (no account): on `*`, for this account's callers.
        endpoints["ec2"].add_to_policy(
            this_accounts("LaunchAndWireTheClustersNodes", CLUSTER_EC2_WRITES, ["*"])
        )
    return network
