"""The EC2 quota every self-hosted route's GPU nodes count against: "Running On-Demand G and VT instances", in
vCPUs, sized for what each of the route's GPU groups may run at once, plus what the account already runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from sonic_deploy.config import Settings
from sonic_deploy.preflight.capacity_in_use import InUse, gpu_vcpus_in_use
from sonic_deploy.preflight.quotas import increase_command, quota_by_code
from sonic_deploy.preflight.results import CheckResult, aws_error, error_code, failed, passed

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_service_quotas import ServiceQuotasClient

G_AND_VT_QUOTA_CODE = "L-DB2E81BA"  # "Running On-Demand G and VT instances", in vCPUs
G_AND_VT_CHECK = "quota: Running On-Demand G and VT instances"


@dataclass(frozen=True)
class GpuGroup:
    """Up to `instances` instances at once, each of any of `types`: sized for the largest, since EC2 (or
    Karpenter) picks among them by what it has, so any mix up to all-largest can run."""

    label: str  # how `instances` is counted, as the detail shows it: "max_instances 4 x 2 (blue/green)"
    instances: int
    types: list[str]


def check_g_and_vt_quota(
    quotas: ServiceQuotasClient, ec2: EC2Client, settings: Settings, stack: str, groups: Sequence[GpuGroup]
) -> CheckResult:
    """The groups at their most at once, + the On-Demand G/VT vCPUs running outside `stack`."""
    check = G_AND_VT_CHECK
    region = settings.environment.region
    catalogue = settings.catalogue.instance_types
    every_type = list(dict.fromkeys(t for group in groups for t in group.types))
    unknown = [name for name in every_type if name not in catalogue]
    if unknown:
        return failed(
            check,
            f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not in config/instance_types.toml, "
            "so the vCPUs are unknown",
            f"add a row for {', '.join(unknown)} (gpus, gpu, vcpus, memory_gib)",
        )
    try:
        quota = quota_by_code(quotas, "ec2", G_AND_VT_QUOTA_CODE)
    except ClientError as error:
        return aws_error(check, error, "servicequotas:GetServiceQuota")
    if quota is None:
        return failed(
            check,
            f"Service Quotas does not know {G_AND_VT_QUOTA_CODE} in {region}",
            "check the Region; G instances may not be offered there",
        )
    try:
        elsewhere = gpu_vcpus_in_use(ec2, exclude_stack=stack)
        used_text = f"{elsewhere.amount} vCPUs on {elsewhere.holders} G/VT instances outside {stack}"
    except ClientError as error:
        elsewhere = InUse(0, 0)
        used_text = f"G/VT instances already running unknown ({error_code(error)}: ec2:DescribeInstances)"
    needed, parts = elsewhere.amount, []
    for group in groups:
        largest = max(group.types, key=lambda name: catalogue[name].vcpus)
        vcpus = catalogue[largest].vcpus
        needed += group.instances * vcpus
        of_which = f" (the largest of {', '.join(group.types)})" if len(group.types) > 1 else ""
        parts.append(f"{group.label} x {vcpus} vCPUs of {largest}{of_which}")
    source = "applied" if quota.applied else "AWS default"
    detail = f"{quota.value:g} vCPUs ({source}); needs {needed}: {' + '.join(parts)}, + {used_text}"
    if quota.value < needed:
        return failed(check, detail, f"request {needed}: {increase_command('ec2', quota, needed, region)}")
    return passed(check, detail)
