"""The self-managed route: Cartesia's services on ECS, GPU workers in one AZ behind a private NLB."""

from __future__ import annotations

import dataclasses
from typing import Any

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from constructs import Construct

from sonic_deploy.config import Settings
from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.constructs.egress import PrivateAws, S3PrefixList
from sonic_deploy.constructs.encryption import EncryptionKey
from sonic_deploy.constructs.endpoint_policies import al2023_packages, ecr_image_layers
from sonic_deploy.constructs.naming import id_from_name
from sonic_deploy.constructs.network import Network
from sonic_deploy.constructs.probe_canary import canary_for
from sonic_deploy.constructs.probe_task import ProbeTask, turn_hop_endpoints
from sonic_deploy.constructs.registry import ImageRegistry, ImageSource
from sonic_deploy.constructs.scaling import StreamScaling, TrackedMetric
from sonic_deploy.routes.ecs.config import SERVICE_NAMESPACE, EcsConfig
from sonic_deploy.routes.ecs.constructs.api_load_balancer import AccessLogs, ApiCertificate, ApiLoadBalancer
from sonic_deploy.routes.ecs.constructs.gpu_capacity import GpuCapacity, GpuSupply
from sonic_deploy.routes.ecs.constructs.gpu_fallback import GpuFallback
from sonic_deploy.routes.ecs.constructs.licence_store import LicenceStore
from sonic_deploy.routes.ecs.constructs.operations import EcsOperations
from sonic_deploy.routes.ecs.constructs.placement import SingleAzPlacement
from sonic_deploy.routes.ecs.constructs.resilience import ResilienceExperiments
from sonic_deploy.routes.ecs.constructs.self_hosted_sonic import OfflineLicence, Overflow, SelfHostedSonic
from sonic_deploy.routes.ecs.constructs.sonic_metrics import SonicMetrics
from sonic_deploy.routes.ecs.constructs.sonic_secrets import SonicSecrets
from sonic_deploy.routes.ecs.constructs.sonic_service import ContainerSpec, GpuPlacement, SonicService
from sonic_deploy.routes.ecs.constructs.worker_alarms import WorkerAlarms
from sonic_deploy.routes.ecs.constructs.worker_ttfa import WorkerTtfa
from sonic_deploy.routes.ecs.service_addresses import peer_variables
from sonic_deploy.stacks.common import SonicStack, log_retention, network_props

# AWS service endpoints the tasks need without internet (and, in air-gapped mode, with no egress at all).
ECS_ENDPOINTS = [
    ec2.InterfaceVpcEndpointAwsService.ECR,
    ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
    ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_MONITORING,
    ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
    ec2.InterfaceVpcEndpointAwsService.ECS,
    ec2.InterfaceVpcEndpointAwsService.ECS_AGENT,
    ec2.InterfaceVpcEndpointAwsService.ECS_TELEMETRY,
    # The GPU agent resolves its Auto Scaling group's name (DescribeTags), the scraper its targets.
    ec2.InterfaceVpcEndpointAwsService.EC2,
]


class EcsStack(SonicStack):
    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, settings=settings, **kwargs)
        env = settings.environment
        cfg = env.ecs
        assert cfg is not None  # the loader guarantees it for this route
        retention = log_retention(env.log_retention_days)

        connected = cfg.licence_mode == "connected"
        key = EncryptionKey(self, "Encryption", alias=f"alias/{settings.resource_prefix}-ecs").key
        network = Network(
            self,
            "Network",
            key=key,
            flow_log_retention=log_retention(env.network.flow_log_retention_days),
            # Without NAT, the probe task calls the turn hops of `[probe] turn_hops` here (connected, through NAT).
            interface_services=ECS_ENDPOINTS + ([] if connected else turn_hop_endpoints(env.probe.turn_hops)),
            egress=connected,
            nat_gateways=cfg.nat_gateways,
            # The route's tasks and instances are in one AZ (endpoints elsewhere would be paid for idle); a
            # fallback AZ's overflow workers reach these across AZs, billed as cross-AZ data while they run.
            endpoint_zones=[cfg.availability_zone],
            # Image layers, and the GPU hosts' CloudWatch agent package (SonicMetrics), in either mode: the
            # containers' own downloads are from GCS (Cartesia's "Provisioned resources": the API server's
            # migrations, the workers' LoRAs), through NAT, not S3; this account's buckets are read by role.
            s3_reads=[ecr_image_layers(self), al2023_packages(self)],
            **network_props(self, settings, "ecs"),
        )
        # Connected, what has no documented internet need reaches AWS only (constructs/egress.py).
        private_aws = (
            PrivateAws(
                network.endpoint_security_group,
                S3PrefixList(self, "S3PrefixList", key=key, log_retention=retention).prefix_list_id,
            )
            if connected
            else None
        )
        placement = SingleAzPlacement(
            self, "Placement", subnets=network.private_subnets, availability_zone=cfg.availability_zone
        )
        secrets = SonicSecrets(
            self,
            "Secrets",
            api_key_name=cfg.secrets.api_key,
            registry_credentials_name=cfg.secrets.registry_credentials,
            create=cfg.secrets.create,
            key=key,
        )
        registry = ImageRegistry(
            self,
            "Registry",
            key=key,
            registry_credentials=secrets.registry_credentials,
            copy_images=cfg.copy_images,
            copy_log_retention_days=env.log_retention_days,
            copy_memory_mib=cfg.image_copy_memory_mib,
            reuse_repositories=cfg.reuse_repositories,
            images={
                name: ImageSource(
                    s.source, s.tag, settings.ecr_repository(name), s.private_registry, digest=s.digest
                )
                for name, s in settings.ecs_services.items()
            },
        )

        cluster = ecs.Cluster(
            self, "Cluster", vpc=network.vpc, container_insights_v2=ecs.ContainerInsights.ENABLED
        )
        cluster.add_default_cloud_map_namespace(name=SERVICE_NAMESPACE, vpc=network.vpc)
        capacity = GpuCapacity(
            self,
            "GpuCapacity",
            cluster=cluster,
            vpc=network.vpc,
            placement=placement,
            supply=gpu_supply(cfg, cfg.availability_zone),
            min_instances=cfg.min_workers,
            max_instances=cfg.max_workers,
            root_volume_gib=cfg.root_volume_gib,
            instance_warmup=Duration.seconds(cfg.instance_warmup_s),
            private_aws=private_aws,
        )
        alerting = Alerting(self, "Alerting", key=key, emails=cfg.alarms.email)
        fallback = (
            GpuFallback(
                self,
                "Fallback",
                cluster=cluster,
                vpc=network.vpc,
                subnets=network.private_subnets,
                availability_zone=cfg.capacity.fallback.availability_zone,
                supply=gpu_supply(cfg, cfg.capacity.fallback.availability_zone),
                max_instances=cfg.max_workers,
                root_volume_gib=cfg.root_volume_gib,
                instance_warmup=Duration.seconds(cfg.instance_warmup_s),
                alerting=alerting,
                private_aws=private_aws,
            )
            if cfg.capacity.fallback is not None
            else None
        )

        metrics = SonicMetrics(
            self,
            "Metrics",
            cluster=cluster,
            gpu_capacity=capacity,
            agent_image=registry.image("cloudwatch_agent"),
            subnets=placement.subnets,
            log_key=key,
            log_retention=retention,
            worker_job="gpu-worker",
            api_job="api-server",
            worker_ttfa=WorkerTtfa(form=cfg.worker_ttfa.form, unit=cfg.worker_ttfa.unit),
            scraper_cpu=cfg.services["cloudwatch_agent"].cpu,
            scraper_memory_mib=cfg.services["cloudwatch_agent"].memory_mib,
            private_aws=private_aws,
        )
        registry.before_use("cloudwatch_agent", metrics.scraper)
        if fallback is not None:
            metrics.instrument(fallback.capacity)
        alarms = WorkerAlarms(
            self,
            "Alarms",
            alerting=alerting,
            metrics=metrics,
            ttfa_p95_ms=cfg.alarms.worker_ttfa_p95_ms,
            gpu_pinned_percent=cfg.alarms.gpu_pinned_percent,
            gpu_pinned_minutes=cfg.alarms.gpu_pinned_minutes,
            capacity_minutes=cfg.alarms.capacity_minutes,
        )

        offline_licence = None
        if not connected:
            offline_licence = OfflineLicence(
                store=LicenceStore(
                    self,
                    "LicenceStore",
                    vpc=network.vpc,
                    placement=placement,
                    key=key,
                    secret_name=settings.licence_secret_name,
                ),
                data_path=cfg.licence_data_path,
                content_type=cfg.licence_content_type,
            )
        sonic = SelfHostedSonic(
            self,
            "Sonic",
            cluster=cluster,
            subnets=placement.subnets,
            registry=registry,
            containers=_containers(cfg, registry, secrets),
            api_tasks=cfg.api_server_tasks,
            nats_tasks=cfg.nats_tasks,
            gpu_placement=GpuPlacement(capacity.capacity_provider),
            log_key=key,
            log_retention=retention,
            api_deployment_alarms=[alarms.unserviceable],
            worker_deployment_alarms=[alarms.ttfa, alarms.unserviceable],
            offline_licence=offline_licence,
            overflow=Overflow(GpuPlacement(fallback.capacity.capacity_provider), fallback.placement.subnets)
            if fallback is not None
            else None,
            nats_private_aws=private_aws,
        )
        if offline_licence is not None:
            CfnOutput(self, "LicenceProxyService", value=sonic.licence_proxy.service.service_name)
        for scraped in (*sonic.gpu_workers, sonic.api_server):
            if scraped.metrics_port is not None:
                scraped.allow_from(metrics.security_group, "Prometheus scrape", port=scraped.metrics_port)

        lb = ApiLoadBalancer(
            self,
            "Api",
            vpc=network.vpc,
            vpc_cidr=settings.route_cidr("ecs"),
            placement=placement,
            api=sonic.api_server,
            listener_port=settings.ecs_listener_port,
            idle_timeout=Duration.seconds(cfg.nlb_idle_timeout_s),
            deregistration_delay=Duration.seconds(cfg.deregistration_delay_s),
            # The loader has checked that TLS has a domain name and one certificate source.
            certificate=ApiCertificate(
                str(cfg.api.domain_name), cfg.api.certificate_arn, cfg.api.private_ca_arn
            )
            if settings.ecs_tls
            else None,
            access_logs=AccessLogs(Duration.days(cfg.api.access_log_retention_days), key)
            if cfg.api.access_logs
            else None,
            deletion_protection=settings.ecs_deletion_protection,
            client_cidrs=env.network.client_cidrs,
            plaintext_accepted_by=settings.ecs_plaintext_accepted_by,
        )

        self._scaling(cfg, cluster, sonic.workers, metrics)
        if fallback is not None and sonic.overflow_workers is not None:
            assert cfg.capacity.fallback is not None
            fallback.scale_overflow(
                sonic.overflow_workers,
                first_workers=sonic.workers,
                first_group=capacity,
                after=Duration.minutes(cfg.capacity.fallback.after_minutes),
                scale_in_after=Duration.minutes(cfg.capacity.fallback.scale_in_minutes),
                start_time=Duration.seconds(cfg.instance_warmup_s + cfg.worker_start_period_s),
                max_tasks=cfg.max_workers,
            )
        unhealthy_targets = alerting.alarm(
            "UnhealthyApiTargets",
            metric=lb.unhealthy_targets(),
            threshold=0,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=2,
            description="API server targets behind the load balancer are failing GET /status.",
        )
        # The probe inside the VPC, in the workers' AZ, through the internal NLB (docs/deploy.md).
        probe = ProbeTask(
            self,
            "Probe",
            network=network,
            vpc_cidr=settings.route_cidr("ecs"),
            subnets=placement.subnets,
            key=key,
            log_retention=retention,
            log_retention_days=env.log_retention_days,
            config=env.probe,
            cluster=cluster,
            calls_in_vpc=[ec2.Port.tcp(settings.ecs_listener_port)],
            secrets={"CARTESIA_API_KEY": secrets.for_task("api_key")},
        )
        target = ["probe", "ws", "--url", lb.websocket_url, "--model-id", settings.ecs_model_id]
        target += ["--cartesia-version", cfg.cartesia_version]
        canary = canary_for(self, probe, target, settings)
        # Caller alarms on the whole stack, the composites that page, the dashboard (docs/operate.md).
        EcsOperations(
            self,
            "Operations",
            settings=settings,
            alerting=alerting,
            metrics=metrics,
            worker_alarms=alarms,
            unhealthy_targets=unhealthy_targets,
            load_balancer=lb,
            workers=sonic.workers,
            gpu_capacity=capacity,
            canary_schedule=canary,
            fallback=fallback,
            key=key,
            log_retention=retention,
            licence_load_failures=offline_licence.store.load_failures if offline_licence else None,
        )

        CfnOutput(self, "ApiUrl", value=lb.websocket_url)
        CfnOutput(self, "LoadBalancerDnsName", value=lb.load_balancer.load_balancer_dns_name)
        # What an agent needs besides the URL (`sonic-deploy connect` reads them): the key's secret by name,
        # never its value.
        CfnOutput(self, "ModelId", value=settings.ecs_model_id)
        CfnOutput(self, "CartesiaVersion", value=cfg.cartesia_version)
        CfnOutput(self, "ApiKeySecret", value=cfg.secrets.api_key)
        CfnOutput(self, "Region", value=self.region)
        CfnOutput(self, "ClusterName", value=cluster.cluster_name)
        CfnOutput(self, "AvailabilityZone", value=placement.availability_zone)
        # For a capacity reservation made for the stack's placement groups (docs/capacity.md).
        _placement_outputs(self, "", placement)
        if fallback is not None:
            _placement_outputs(self, "Fallback", fallback.placement)
        for name, repository in registry.repositories.items():
            CfnOutput(self, f"{id_from_name(name)}Repository", value=repository.repository_uri)
        if cfg.resilience.enabled:  # docs/operate.md, "Resilience rehearsal"
            resilience = ResilienceExperiments(
                self,
                "Resilience",
                cluster=cluster,
                workers=sonic.workers.service,
                api_server=sonic.api_server.service,
                gpu_group=capacity.auto_scaling_group,
                availability_zone=cfg.availability_zone,
                # What callers feel; GPU saturation and missing GPU metrics are expected while capacity is down.
                stop_alarms=[alarms.no_capacity, alarms.unserviceable, alarms.ttfa]
                + [alarm for alarm in alerting.alarms if alarm.node.id == "UnhealthyApiTargets"],
                key=key,
                log_retention=retention,
                insufficient_capacity_duration=Duration.minutes(cfg.resilience.insufficient_capacity_minutes),
                insufficient_capacity_percent=cfg.resilience.insufficient_capacity_percent,
            )
            for name, experiment in resilience.templates.items():
                CfnOutput(self, f"{name}Experiment", value=experiment.attr_id)

    def _scaling(
        self, cfg: EcsConfig, cluster: ecs.Cluster, workers: SonicService, metrics: SonicMetrics
    ) -> None:
        StreamScaling(
            self,
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


def _placement_outputs(stack: Stack, prefix: str, placement: SingleAzPlacement) -> None:
    """<prefix>PlacementGroupName and -Arn, and the fallback's AZ (the first's is AvailabilityZone)."""
    CfnOutput(stack, f"{prefix}PlacementGroupName", value=placement.placement_group.placement_group_name)
    CfnOutput(stack, f"{prefix}PlacementGroupArn", value=placement.placement_group_arn)
    if prefix:
        CfnOutput(stack, f"{prefix}AvailabilityZone", value=placement.availability_zone)


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
