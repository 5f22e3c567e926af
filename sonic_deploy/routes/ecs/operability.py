"""What operates the ECS route: the alarms that need the whole stack, the probe and its canary, the
composites that page and the dashboard (EcsOperations), and the resilience rehearsal.

Plain functions, not Constructs: they build their children straight under the stack, with the ids they have
always had, so their construct paths (and so their logical IDs) do not change."""

from __future__ import annotations

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_logs as logs

from sonic_deploy.config import Settings
from sonic_deploy.routes.ecs.config import EcsConfig
from sonic_deploy.routes.ecs.constructs.operations import EcsOperations
from sonic_deploy.routes.ecs.constructs.resilience import ResilienceExperiments
from sonic_deploy.routes.ecs.fleet import GpuFleet
from sonic_deploy.routes.ecs.foundation import Foundation
from sonic_deploy.routes.ecs.services import Services
from sonic_deploy.stacks.common import probe_and_canary


def operate(
    stack: Stack,
    settings: Settings,
    base: Foundation,
    fleet: GpuFleet,
    services: Services,
    *,
    log_retention: logs.RetentionDays,
) -> None:
    """Builds the UnhealthyApiTargets alarm (in Alerting), Probe and Canary (`probe_and_canary`), then
    Operations: the caller alarms on the whole stack, the composites that page, the dashboard
    (docs/operate.md)."""
    cfg = settings.environment.ecs
    assert cfg is not None
    lb = services.load_balancer
    unhealthy_targets = fleet.alerting.alarm(
        "UnhealthyApiTargets",
        metric=lb.unhealthy_targets(),
        threshold=0,
        comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluation_periods=2,
        description="API server targets behind the load balancer are failing GET /status.",
    )
    # The probe inside the VPC, in the workers' AZ, through the internal NLB (docs/deploy.md).
    target = ["probe", "ws", "--url", lb.websocket_url, "--model-id", settings.ecs_model_id]
    target += ["--cartesia-version", cfg.cartesia_version]
    canary = probe_and_canary(
        stack,
        settings,
        "ecs",
        network=base.network,
        subnets=base.placement.subnets,
        key=base.key,
        target=target,
        cluster=fleet.cluster,
        calls_in_vpc=[ec2.Port.tcp(settings.ecs_listener_port)],
        secrets={"CARTESIA_API_KEY": base.secrets.for_task("api_key")},
    )
    offline_licence = services.offline_licence
    EcsOperations(
        stack,
        "Operations",
        settings=settings,
        alerting=fleet.alerting,
        metrics=fleet.metrics,
        worker_alarms=fleet.alarms,
        unhealthy_targets=unhealthy_targets,
        load_balancer=lb,
        workers=services.sonic.workers,
        gpu_capacity=fleet.capacity,
        canary_schedule=canary,
        fallback=fleet.fallback,
        key=base.key,
        log_retention=log_retention,
        licence_load_failures=offline_licence.store.load_failures if offline_licence else None,
    )


def rehearse(
    stack: Stack,
    cfg: EcsConfig,
    base: Foundation,
    fleet: GpuFleet,
    services: Services,
    *,
    log_retention: logs.RetentionDays,
) -> None:
    """Builds Resilience and an output per experiment, with `[ecs.resilience]` on (docs/operate.md,
    "Resilience rehearsal")."""
    if not cfg.resilience.enabled:
        return
    alarms, sonic = fleet.alarms, services.sonic
    resilience = ResilienceExperiments(
        stack,
        "Resilience",
        cluster=fleet.cluster,
        workers=sonic.workers.service,
        api_server=sonic.api_server.service,
        gpu_group=fleet.capacity.auto_scaling_group,
        availability_zone=cfg.availability_zone,
        # What callers feel; GPU saturation and missing GPU metrics are expected while capacity is down.
        stop_alarms=[alarms.no_capacity, alarms.unserviceable, alarms.ttfa]
        + [alarm for alarm in fleet.alerting.alarms if alarm.node.id == "UnhealthyApiTargets"],
        key=base.key,
        log_retention=log_retention,
        insufficient_capacity_duration=Duration.minutes(cfg.resilience.insufficient_capacity_minutes),
        insufficient_capacity_percent=cfg.resilience.insufficient_capacity_percent,
    )
    for name, experiment in resilience.templates.items():
        CfnOutput(stack, f"{name}Experiment", value=experiment.attr_id)
