"""What other workloads in the account already hold of the quotas sonic-deploy needs.

Both quotas are per account and Region: GPU instances another team runs, or another SageMaker endpoint on the
same instance type, leave less for Sonic. sonic-deploy's own instances are left out (they are part of the
fleet the quota check sizes), found by the stack name CloudFormation tags them with, or by endpoint name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_sagemaker import SageMakerClient

# Instance families counted by "Running On-Demand G and VT instances": g4dn, g5, g6, g6e, gr6, ..., vt1.
G_AND_VT_PREFIXES = ("g", "vt")
STACK_TAG = "aws:cloudformation:stack-name"
ACTIVE_ENDPOINT_STATES = ("Creating", "Updating", "SystemUpdating", "RollingBack", "InService")


@dataclass(frozen=True)
class InUse:
    amount: int  # vCPUs (EC2) or instances (SageMaker)
    holders: int  # instances or endpoints holding them


def gpu_vcpus_in_use(ec2: EC2Client, exclude_stack: str) -> InUse:
    """On-Demand G and VT vCPUs pending or running, other than the ones `exclude_stack` launched."""
    counts: dict[str, int] = {}
    paginator = ec2.get_paginator("describe_instances")
    for page in paginator.paginate(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    ):
        for reservation in page["Reservations"]:
            for instance in reservation.get("Instances", []):
                instance_type = str(instance.get("InstanceType", ""))
                tags = {tag.get("Key"): tag.get("Value") for tag in instance.get("Tags", [])}
                if (
                    instance_type.startswith(G_AND_VT_PREFIXES)
                    and instance.get("InstanceLifecycle") != "spot"  # Spot has its own quota
                    and tags.get(STACK_TAG) != exclude_stack
                ):
                    counts[instance_type] = counts.get(instance_type, 0) + 1
    if not counts:
        return InUse(0, 0)
    described = ec2.describe_instance_types(InstanceTypes=list(counts))["InstanceTypes"]  # type: ignore[arg-type]
    vcpus = {str(row["InstanceType"]): int(row["VCpuInfo"]["DefaultVCpus"]) for row in described}
    return InUse(sum(vcpus.get(name, 0) * count for name, count in counts.items()), sum(counts.values()))


def endpoint_instances_in_use(sagemaker: SageMakerClient, instance_type: str, exclude_endpoint: str) -> InUse:
    """Instances of `instance_type` behind SageMaker endpoints other than `exclude_endpoint`."""
    instances = endpoints = 0
    for page in sagemaker.get_paginator("list_endpoints").paginate():
        for summary in page["Endpoints"]:
            name = summary["EndpointName"]
            if name == exclude_endpoint or summary["EndpointStatus"] not in ACTIVE_ENDPOINT_STATES:
                continue
            endpoint = sagemaker.describe_endpoint(EndpointName=name)
            config = sagemaker.describe_endpoint_config(EndpointConfigName=endpoint["EndpointConfigName"])
            types = {v["VariantName"]: v.get("InstanceType") for v in config["ProductionVariants"]}
            count = sum(
                int(variant.get("CurrentInstanceCount", 0))
                for variant in endpoint.get("ProductionVariants", [])
                if types.get(variant["VariantName"]) == instance_type
            )
            if count:
                instances, endpoints = instances + count, endpoints + 1
    return InUse(instances, endpoints)
