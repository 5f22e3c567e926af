"""What both stacks share: their base class, the translations from validated config to construct arguments,
and the probe task with its canary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Acknowledgment, Stack, Validations
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from sonic_deploy.config import Settings
from sonic_deploy.config.schema import LOG_RETENTION_DAYS
from sonic_deploy.constructs.findings import ignore_cfn_lint
from sonic_deploy.constructs.network import Network, import_vpc
from sonic_deploy.constructs.probe_canary import ProbeCanary, canary_for
from sonic_deploy.constructs.probe_task import ProbeTask

_RETENTION = dict(
    zip(
        LOG_RETENTION_DAYS,
        [m for m in logs.RetentionDays if m is not logs.RetentionDays.INFINITE],
        strict=True,
    )
)


class SonicStack(Stack):
    """A stack whose Availability Zones are the ones named in config. CDK would otherwise look them up for a
    stack with an explicit account (a context lookup: an AWS call at synth, which fails offline)."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, **kwargs: Any) -> None:
        self._zones = list(settings.environment.network.zones)
        super().__init__(scope, construct_id, **kwargs)
        Validations.of(self).acknowledge(
            Acknowledgment(
                id="CloudFormation-Validate::W3010",
                reason="Availability Zones are named in config on purpose: synth stays offline, and the ECS route "
                "pins its GPU instances to one of them",
            )
        )
        ignore_cfn_lint(
            self,
            "W3010",
            reason="Availability Zones are named in config on purpose: synth stays offline (no lookup), and the "
            "ECS route pins its GPU instances, placement group and load balancer to one of them",
        )

    @property
    def availability_zones(self) -> list[str]:
        return self._zones


def log_retention(days: int) -> logs.RetentionDays:
    """CloudWatch Logs retention for a number of days the config loader has already checked."""
    return _RETENTION[days]


def network_props(scope: Construct, settings: Settings, route: str) -> dict[str, Any]:
    """The Network construct's placement arguments: a new VPC in the named AZs, in the route's half of
    network.cidr, or the configured existing one."""
    net = settings.environment.network
    existing = net.existing_vpc
    if existing is None:
        return {"availability_zones": net.availability_zones, "cidr": settings.route_cidr(route)}
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


def probe_and_canary(
    stack: Stack,
    settings: Settings,
    route: str,
    *,
    network: Network,
    subnets: ec2.SubnetSelection,
    key: kms.IKey,
    target: Sequence[str],
    cluster: ecs.ICluster | None = None,
    calls_in_vpc: Sequence[ec2.Port] = (),
    task_statements: Sequence[iam.PolicyStatement] = (),
    secrets: Mapping[str, ecs.Secret] | None = None,
) -> ProbeCanary | None:
    """The route's probe task ("Probe", in the VPC, calling as the route's callers do: docs/deploy.md) and its
    canary ("Canary", calling `target`; None when `[canary]` is off), both straight under the stack. The
    keyword arguments after `target` are ProbeTask's."""
    env = settings.environment
    probe = ProbeTask(
        stack,
        "Probe",
        network=network,
        vpc_cidr=settings.route_cidr(route),
        subnets=subnets,
        key=key,
        log_retention=log_retention(env.log_retention_days),
        log_retention_days=env.log_retention_days,
        config=env.probe,
        cluster=cluster,
        calls_in_vpc=calls_in_vpc,
        task_statements=task_statements,
        secrets=secrets,
    )
    return canary_for(stack, probe, target, settings)
