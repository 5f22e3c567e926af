"""Service Quotas look-ups: the applied value when the account has one, else AWS's default."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

if TYPE_CHECKING:
    from mypy_boto3_service_quotas import ServiceQuotasClient

# A blue/green update (all-at-once for Marketplace endpoints; a rolling ECS deployment at 200 % maximum)
# briefly runs a second fleet as large as the first.
BLUE_GREEN_FACTOR = 2


@dataclass(frozen=True)
class Quota:
    name: str
    code: str
    value: float
    applied: bool  # False: AWS's default, the account has no applied value of its own


def quota_by_name(client: ServiceQuotasClient, service_code: str, name: str) -> Quota | None:
    """Service Quotas has no look-up by name; SageMaker's per-instance-type quotas are only known by name."""
    wanted = name.casefold()
    for applied, paginator_name in (
        (True, "list_service_quotas"),
        (False, "list_aws_default_service_quotas"),
    ):
        paginator = client.get_paginator(paginator_name)  # type: ignore[call-overload]
        for page in paginator.paginate(ServiceCode=service_code):
            for quota in page["Quotas"]:
                if str(quota.get("QuotaName", "")).casefold() == wanted:
                    return Quota(
                        str(quota["QuotaName"]), str(quota["QuotaCode"]), float(quota["Value"]), applied
                    )
    return None


def quota_by_code(client: ServiceQuotasClient, service_code: str, quota_code: str) -> Quota | None:
    try:
        quota = client.get_service_quota(ServiceCode=service_code, QuotaCode=quota_code)["Quota"]
        applied = True
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") != "NoSuchResourceException":
            raise
        try:
            quota = client.get_aws_default_service_quota(ServiceCode=service_code, QuotaCode=quota_code)[
                "Quota"
            ]
        except ClientError as default_error:
            if default_error.response.get("Error", {}).get("Code") != "NoSuchResourceException":
                raise
            return None
        applied = False
    return Quota(str(quota.get("QuotaName", quota_code)), quota_code, float(quota.get("Value", 0.0)), applied)


def increase_command(service_code: str, quota: Quota, needed: int, region: str) -> str:
    return (
        f"aws service-quotas request-service-quota-increase --region {region} --service-code {service_code} "
        f"--quota-code {quota.code} --desired-value {needed}"
    )
