"""The ECS route's GPU fleet: the cluster, the GPU capacity in the route's AZ and, when configured, in a
fallback AZ, the metrics of the GPU hosts and workers, and the alarms on them.

A plain class, not a Construct: it builds its children straight under the stack, with the ids they have
always had, so their construct paths (and so their logical IDs) do not change."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_logs as logs

from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.routes.ecs.config import SERVICE_NAMESPACE, EcsConfig
from sonic_deploy.routes.ecs.constructs.gpu_capacity import GpuCapacity, GpuSupply
from sonic_deploy.routes.ecs.constructs.gpu_fallback import GpuFallback
from sonic_deploy.routes.ecs.constructs.sonic_metrics import SonicMetrics
from sonic_deploy.routes.ecs.constructs.worker_alarms import WorkerAlarms
from sonic_deploy.routes.ecs.constructs.worker_ttfa import WorkerTtfa
from sonic_deploy.routes.ecs.foundation import Foundation


def gpu_supply(cfg: EcsConfig, availability_zone: str) -> GpuSupply:
    """What the GPU group in `availability_zone` launches, from `[ecs.capacity]` (the loader has checked it)."""
    capacity = cfg.capacity
    return GpuSupply(
        instance_types=cfg.zone_instance_types()[availability_zone],
        ami=capacity.ami,
        spot=capacity.market == "spot",
        reservations=capacity.reservations,
        reservation_ids=cfg.reservation_ids(availability_zone),
        reservations_only=capacity.reservations_only,
    )


class GpuFleet:
    """Builds Cluster, GpuCapacity, Alerting, Fallback (when configured), Metrics and Alarms under the stack,
    in that order: Alerting, the stack's one, comes before the fallback, whose FallbackInUse is its child."""

    def __init__(
        self, stack: Stack, cfg: EcsConfig, base: Foundation, *, log_retention: logs.RetentionDays
    ) -> None:
        network, placement = base.network, base.placement
        self.cluster = ecs.Cluster(
            stack, "Cluster", vpc=network.vpc, container_insights_v2=ecs.ContainerInsights.ENABLED
        )
        self.cluster.add_default_cloud_map_namespace(name=SERVICE_NAMESPACE, vpc=network.vpc)
        self.capacity = GpuCapacity(
            stack,
            "GpuCapacity",
            cluster=self.cluster,
            vpc=network.vpc,
            placement=placement,
            supply=gpu_supply(cfg, cfg.availability_zone),
            min_instances=cfg.min_workers,
            max_instances=cfg.max_workers,
            root_volume_gib=cfg.root_volume_gib,
            instance_warmup=Duration.seconds(cfg.instance_warmup_s),
            private_aws=base.private_aws,
        )
        self.alerting = Alerting(stack, "Alerting", key=base.key, emails=cfg.alarms.email)
        self.fallback = (
            GpuFallback(
                stack,
                "Fallback",
                cluster=self.cluster,
                vpc=network.vpc,
                subnets=network.private_subnets,
                availability_zone=cfg.capacity.fallback.availability_zone,
                supply=gpu_supply(cfg, cfg.capacity.fallback.availability_zone),
                max_instances=cfg.max_workers,
                root_volume_gib=cfg.root_volume_gib,
                instance_warmup=Duration.seconds(cfg.instance_warmup_s),
                alerting=self.alerting,
                private_aws=base.private_aws,
            )
            if cfg.capacity.fallback is not None
            else None
        )

        self.metrics = SonicMetrics(
            stack,
            "Metrics",
            cluster=self.cluster,
            gpu_capacity=self.capacity,
            agent_image=base.registry.image("cloudwatch_agent"),
            subnets=placement.subnets,
            log_key=base.key,
            log_retention=log_retention,
            worker_job="gpu-worker",
            api_job="api-server",
            worker_ttfa=WorkerTtfa(form=cfg.worker_ttfa.form, unit=cfg.worker_ttfa.unit),
            scraper_cpu=cfg.services["cloudwatch_agent"].cpu,
            scraper_memory_mib=cfg.services["cloudwatch_agent"].memory_mib,
            private_aws=base.private_aws,
        )
        base.registry.before_use("cloudwatch_agent", self.metrics.scraper)
        if self.fallback is not None:
            self.metrics.instrument(self.fallback.capacity)
        self.alarms = WorkerAlarms(
            stack,
            "Alarms",
            alerting=self.alerting,
            metrics=self.metrics,
            ttfa_p95_ms=cfg.alarms.worker_ttfa_p95_ms,
            gpu_pinned_percent=cfg.alarms.gpu_pinned_percent,
            gpu_pinned_minutes=cfg.alarms.gpu_pinned_minutes,
            capacity_minutes=cfg.alarms.capacity_minutes,
        )
