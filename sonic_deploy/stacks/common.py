"""Translations from validated config to construct arguments, shared by both stacks."""

from __future__ import annotations

from typing import Any

from aws_cdk import aws_logs as logs
from constructs import Construct

from sonic_deploy.config import Settings
from sonic_deploy.config.schema import LOG_RETENTION_DAYS
from sonic_deploy.constructs.network import import_vpc

_RETENTION = dict(
    zip(
        LOG_RETENTION_DAYS,
        [m for m in logs.RetentionDays if m is not logs.RetentionDays.INFINITE],
        strict=True,
    )
)


def log_retention(days: int) -> logs.RetentionDays:
    """CloudWatch Logs retention for a number of days the config loader has already checked."""
    return _RETENTION[days]


def network_props(scope: Construct, settings: Settings) -> dict[str, Any]:
    """The Network construct's placement arguments: new VPC in the named AZs, or the configured one."""
    net = settings.environment.network
    existing = net.existing_vpc
    if existing is None:
        return {"availability_zones": net.availability_zones, "cidr": net.cidr}
    vpc = import_vpc(
        scope,
        "ExistingVpc",
        vpc_id=existing.vpc_id,
        vpc_cidr=existing.vpc_cidr,
        availability_zones=existing.availability_zones,
        private_subnet_ids=existing.private_subnet_ids,
        private_route_table_ids=existing.private_route_table_ids,
    )
    return {"availability_zones": existing.availability_zones, "cidr": existing.vpc_cidr, "existing_vpc": vpc}
