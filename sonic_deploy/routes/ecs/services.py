"""The ECS route's services: Cartesia's containers (the licence store first when air-gapped), the internal
load balancer in front of the API server, and the workers' scaling (the overflow's too, with a fallback AZ).

A plain class, not a Construct: it builds its children straight under the stack, with the ids they have
always had, so their construct paths (and so their logical IDs) do not change."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_logs as logs

from sonic_deploy.constructs.api_load_balancer import AccessLogs, ApiCertificate, ApiLoadBalancer
from sonic_deploy.constructs.registry import ImageRegistry
from sonic_deploy.constructs.scaling import StreamScaling, TrackedMetric
from sonic_deploy.constructs.sonic_secrets import SonicSecrets
from sonic_deploy.routes.ecs import outputs
from sonic_deploy.routes.ecs.config import EcsConfig
from sonic_deploy.routes.ecs.constructs.licence_store import LicenceStore
from sonic_deploy.routes.ecs.constructs.self_hosted_sonic import OfflineLicence, Overflow, SelfHostedSonic
from sonic_deploy.routes.ecs.constructs.sonic_metrics import SonicMetrics
from sonic_deploy.routes.ecs.constructs.sonic_service import ContainerSpec, GpuPlacement, SonicService
from sonic_deploy.routes.ecs.fleet import GpuFleet
from sonic_deploy.routes.ecs.foundation import Foundation
from sonic_deploy.routes.ecs.service_addresses import peer_variables


class Services:
    """Builds LicenceStore (air-gapped), Sonic, Api and WorkerScaling under the stack, in that order, then the
    overflow's scaling on the fallback. `vpc_cidr` and the listener's settings are the load balancer's;
    `licence_secret_name`, the offline licence's."""

    def __init__(
        self,
        stack: Stack,
        cfg: EcsConfig,
        base: Foundation,
        fleet: GpuFleet,
        *,
        log_retention: logs.RetentionDays,
        licence_secret_name: str,
        vpc_cidr: str,
        listener_port: int,
        tls: bool,
        deletion_protection: bool,
        client_cidrs: Sequence[str],
        plaintext_accepted_by: str | None,
    ) -> None:
        network, placement, fallback, alarms = base.network, base.placement, fleet.fallback, fleet.alarms
        self.offline_licence: OfflineLicence | None = None
        if not base.connected:
            self.offline_licence = OfflineLicence(
                store=LicenceStore(
                    stack,
                    "LicenceStore",
                    vpc=network.vpc,
                    placement=placement,
                    key=base.key,
                    secret_name=licence_secret_name,
                ),
                data_path=cfg.licence_data_path,
                content_type=cfg.licence_content_type,
            )
        self.sonic = sonic = SelfHostedSonic(
            stack,
            "Sonic",
            cluster=fleet.cluster,
            subnets=placement.subnets,
            registry=base.registry,
            containers=_containers(cfg, base.registry, base.secrets),
            api_tasks=cfg.api_server_tasks,
            nats_tasks=cfg.nats_tasks,
            gpu_placement=GpuPlacement(fleet.capacity.capacity_provider),
            log_key=base.key,
            log_retention=log_retention,
            api_deployment_alarms=[alarms.unserviceable],
            worker_deployment_alarms=[alarms.ttfa, alarms.unserviceable],
            offline_licence=self.offline_licence,
            overflow=Overflow(GpuPlacement(fallback.capacity.capacity_provider), fallback.placement.subnets)
            if fallback is not None
            else None,
            nats_private_aws=base.private_aws,
        )
        if self.offline_licence is not None:
            CfnOutput(stack, outputs.LICENCE_PROXY_SERVICE, value=sonic.licence_proxy.service.service_name)
        for scraped in (*sonic.gpu_workers, sonic.api_server):
            if scraped.metrics_port is not None:
                scraped.allow_from(
                    fleet.metrics.security_group, "Prometheus scrape", port=scraped.metrics_port
                )

        self.load_balancer = ApiLoadBalancer(
            stack,
            "Api",
            vpc=network.vpc,
            vpc_cidr=vpc_cidr,
            placement=placement,
            api_port=sonic.api_server.port,
            api_security_group=sonic.api_server.security_group,
            api_targets=[sonic.api_server.service],
            config_table="ecs.api",
            listener_port=listener_port,
            idle_timeout=Duration.seconds(cfg.nlb_idle_timeout_s),
            deregistration_delay=Duration.seconds(cfg.deregistration_delay_s),
            # The loader has checked that TLS has a domain name and one certificate source.
            certificate=ApiCertificate(
                str(cfg.api.domain_name), cfg.api.certificate_arn, cfg.api.private_ca_arn
            )
            if tls
            else None,
            access_logs=AccessLogs(Duration.days(cfg.api.access_log_retention_days), base.key)
            if cfg.api.access_logs
            else None,
            deletion_protection=deletion_protection,
            client_cidrs=client_cidrs,
            plaintext_accepted_by=plaintext_accepted_by,
        )

        _scaling(stack, cfg, fleet.cluster, sonic.workers, fleet.metrics)
        if fallback is not None and sonic.overflow_workers is not None:
            assert cfg.capacity.fallback is not None
            fallback.scale_overflow(
                sonic.overflow_workers,
                first_workers=sonic.workers,
                first_group=fleet.capacity,
                after=Duration.minutes(cfg.capacity.fallback.after_minutes),
                scale_in_after=Duration.minutes(cfg.capacity.fallback.scale_in_minutes),
                start_time=Duration.seconds(cfg.instance_warmup_s + cfg.worker_start_period_s),
                max_tasks=cfg.max_workers,
            )


def _scaling(
    stack: Stack, cfg: EcsConfig, cluster: ecs.Cluster, workers: SonicService, metrics: SonicMetrics
) -> None:
    StreamScaling(
        stack,
        "WorkerScaling",
        service_namespace=appscaling.ServiceNamespace.ECS,
        resource_id=f"service/{cluster.cluster_name}/{workers.service.service_name}",
        scalable_dimension="ecs:service:DesiredCount",
        min_capacity=cfg.min_workers,
        max_capacity=cfg.max_workers,
        # Cartesia's own signal: chunks in progress over chunks the workers can take.
        streams=TrackedMetric.math(
            "load / capacity",
            {
                "load": metrics.sonic_metric("inferno_worker_load"),
                "capacity": metrics.sonic_metric("inferno_worker_capacity"),
            },
        ),
        streams_target=cfg.target_utilisation,
        gpu=TrackedMetric.single(metrics.gpu_utilisation()),
        gpu_target_percent=round(100 * cfg.target_utilisation, 1),
        scale_out_cooldown=Duration.seconds(cfg.scale_out_cooldown_s),
        scale_in_cooldown=Duration.seconds(cfg.scale_in_cooldown_s),
    )


def _containers(cfg: EcsConfig, registry: ImageRegistry, secrets: SonicSecrets) -> dict[str, ContainerSpec]:
    """The four services' containers from config (the loader has checked each has a port); the GPU worker
    also gets its GPU and a long health grace. The CloudWatch agent is SonicMetrics' own, the licence loader
    LicenceStore's."""
    containers: dict[str, ContainerSpec] = {}
    for name, spec in cfg.services.items():
        if name in ("cloudwatch_agent", "licence_loader") or spec.port is None:
            continue
        containers[name] = ContainerSpec(
            image=registry.image(name),
            port=spec.port,
            cpu=spec.cpu,
            memory_mib=spec.memory_mib,
            environment=spec.environment,
            not_secrets=spec.not_secrets,
            peer_variables=peer_variables(spec),
            secrets={variable: secrets.for_task(ref) for variable, ref in spec.secrets.items()},
            command=spec.command,
            health_check=spec.health_check,
            metrics_port=spec.metrics_port,
        )
    containers["gpu_worker"] = dataclasses.replace(
        containers["gpu_worker"],
        gpu=True,
        health_start_period=Duration.seconds(cfg.worker_start_period_s),
        health_retries=cfg.worker_health_retries,
        stop_timeout=Duration.seconds(cfg.worker_stop_timeout_s),
    )
    containers["api_server"] = dataclasses.replace(
        containers["api_server"], stop_timeout=Duration.seconds(cfg.api_stop_timeout_s)
    )
    return containers
