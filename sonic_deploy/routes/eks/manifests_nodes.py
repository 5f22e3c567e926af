"""The EKS route's GPU nodes as Karpenter objects (plain dicts, no aws_cdk: the tools import the route), and
the object header the route's other manifest modules share. Field names: aws/karpenter-provider-aws at
1d927085 (v1.14), pkg/apis/v1/ec2nodeclass.go and pkg/apis/crds/karpenter.sh_nodepools.yaml."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Manifest = dict[str, Any]

GPU_RESOURCE = "nvidia.com/gpu"  # the NVIDIA device plugin's resource; also the GPU nodes' taint key
# The label every GPU NodePool puts on its nodes (value: GpuNodes.name); the workers select it. A domain of
# our own: Karpenter refuses labels under karpenter.sh and karpenter.k8s.aws in a NodePool template.
GPU_NODES_LABEL = "sonic-deploy/gpu-nodes"
# AL2023's root device, where Karpenter's own default mapping for the family puts it.
ROOT_DEVICE = "/dev/xvda"


def header(
    api_version: str,
    kind: str,
    name: str,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> Manifest:
    """apiVersion, kind and metadata of one object (no namespace for a cluster-scoped kind)."""
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = dict(labels)
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata}


@dataclass(frozen=True)
class GpuNodes:
    """Where Karpenter launches GPU workers: one EC2NodeClass and a NodePool per instance type. String
    values may be CDK tokens: placed as they are, never parsed."""

    name: str  # the EC2NodeClass's name and the NodePools' prefix, e.g. "sonic-gpu"
    ami_alias: str  # Karpenter's amiSelectorTerms alias, pinned: "al2023@v20260820"
    instance_profile: (
        str  # the IAM instance profile (name) the nodes run with: the stack's, for its node role
    )
    subnet_id: str
    security_group_ids: tuple[str, ...]
    placement_group_name: str  # an existing cluster placement group (Karpenter >= 1.11)
    kms_key_arn: str | None  # encrypts the root volume; None: the account's EBS key (as ECS's GPU hosts)
    root_volume_gib: int
    instance_types: tuple[str, ...]  # in order of preference: the first gets the highest weight
    max_gpus: int  # each NodePool's limit on nvidia.com/gpu (max_workers: one GPU per worker)
    availability_zone: str
    tags: Mapping[str, str]
    # How long a GPU node stays once it runs no worker (daemons aside) before Karpenter removes it.
    empty_for_s: int = 300


def gpu_nodes(n: GpuNodes) -> list[Manifest]:
    """The EC2NodeClass, then one NodePool per instance type, weights descending in config order."""
    if not n.instance_types or len(n.instance_types) > 100:
        raise ValueError("GpuNodes.instance_types: 1 to 100 types (a NodePool's weight is 1 to 100)")
    return [_node_class(n)] + [
        _node_pool(n, instance_type, weight=100 - index)
        for index, instance_type in enumerate(n.instance_types)
    ]


def _node_class(n: GpuNodes) -> Manifest:
    node_class = header("karpenter.k8s.aws/v1", "EC2NodeClass", n.name)
    node_class["spec"] = {
        # An alias pins the AMI release; Karpenter picks the family's NVIDIA variant for NVIDIA types.
        "amiSelectorTerms": [{"alias": n.ami_alias}],
        # Not spec.role: Karpenter would make a profile through IAM, which has no VPC endpoint (docs/eks.md 12).
        "instanceProfile": n.instance_profile,
        "subnetSelectorTerms": [{"id": n.subnet_id}],
        "securityGroupSelectorTerms": [{"id": group} for group in n.security_group_ids],
        # ec2nodeclass.go PlacementGroupSelector: a name or an id, not both.
        "placementGroupSelector": {"name": n.placement_group_name},
        "blockDeviceMappings": [
            {
                "deviceName": ROOT_DEVICE,
                "rootVolume": True,
                "ebs": {
                    "volumeSize": f"{int(n.root_volume_gib)}Gi",
                    "volumeType": "gp3",
                    "encrypted": True,
                    **({"kmsKeyID": n.kms_key_arn} if n.kms_key_arn is not None else {}),
                    "deleteOnTermination": True,
                },
            }
        ],
        # IMDSv2 only, one hop: a pod cannot reach the node role's credentials.
        "metadataOptions": {
            "httpEndpoint": "enabled",
            "httpProtocolIPv6": "disabled",
            "httpPutResponseHopLimit": 1,
            "httpTokens": "required",
        },
        "tags": dict(n.tags),
    }
    return node_class


def _node_pool(n: GpuNodes, instance_type: str, *, weight: int) -> Manifest:
    pool = header("karpenter.sh/v1", "NodePool", f"{n.name}-{instance_type.replace('.', '-')}")
    pool["spec"] = {
        "weight": weight,
        "template": {
            "metadata": {"labels": {GPU_NODES_LABEL: n.name}},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": n.name},
                "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [instance_type]},
                    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [n.availability_zone]},
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                ],
                # Only pods that ask for a GPU (and tolerate this) land here.
                "taints": [{"key": GPU_RESOURCE, "effect": "NoSchedule"}],
                # A GPU node lives until it is empty: each replacement is a GPU launch and a model load.
                "expireAfter": "Never",
            },
        },
        "limits": {GPU_RESOURCE: int(n.max_gpus)},
        "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": f"{int(n.empty_for_s)}s"},
    }
    return pool
