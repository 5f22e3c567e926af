"""Cartesia's self-hosted product as four ECS services wired to each other, in one AZ."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from sonic_deploy.constructs.egress import PrivateAws
from sonic_deploy.constructs.naming import id_from_name
from sonic_deploy.constructs.registry import ImageRegistry
from sonic_deploy.routes.ecs.config import NATS_ROUTE_PORT
from sonic_deploy.routes.ecs.constructs.licence_store import LicenceStore
from sonic_deploy.routes.ecs.constructs.sonic_service import ContainerSpec, GpuPlacement, SonicService


@dataclass(frozen=True)
class Overflow:
    """GPU workers in a fallback AZ (GpuFallback): its capacity provider and subnet; its count is GpuFallback's scalable target's."""

    gpu_placement: GpuPlacement
    subnets: ec2.SubnetSelection


@dataclass(frozen=True)
class OfflineLicence:
    """Air-gapped mode: where the proxy keeps its licence (`data_path` on the store's file system), and how
    the store's loader hands it over (`content_type` of POST /license)."""

    store: LicenceStore
    data_path: str
    content_type: str


class SelfHostedSonic(Construct):
    """NATS (a cluster of `nats_tasks` servers) and the licence proxy (one task), the API server and the GPU
    workers; the API server and workers may reach NATS and the licence proxy, nothing else may (and the NATS
    servers each other's route port). Each service waits for its image."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: ecs.Cluster,
        subnets: ec2.SubnetSelection,
        registry: ImageRegistry,
        containers: Mapping[str, ContainerSpec],
        api_tasks: int,
        nats_tasks: int,
        gpu_placement: GpuPlacement,
        log_key: kms.IKey,
        log_retention: logs.RetentionDays,
        api_deployment_alarms: Sequence[cloudwatch.IAlarm],
        worker_deployment_alarms: Sequence[cloudwatch.IAlarm],
        offline_licence: OfflineLicence | None = None,
        overflow: Overflow | None = None,
        nats_private_aws: PrivateAws | None = None,
    ) -> None:
        """The GPU workers' and the overflow's counts are their scalable targets' (EcsStack, GpuFallback): no
        desired count here. `nats_private_aws`: NATS's
        HTTPS to AWS only (no internet need is documented for it)."""
        super().__init__(scope, construct_id)

        def service(
            name: str,
            discovery: str,
            desired: int | None,
            *,
            volume: tuple[ecs.Volume, str] | None = None,
            deployment_alarms: Sequence[cloudwatch.IAlarm] = (),
            placement: GpuPlacement | None = None,
            construct_id: str | None = None,
            in_subnets: ec2.SubnetSelection = subnets,
            metrics_job: str | None = None,
            peer_urls: Mapping[str, str] | None = None,
            private_aws: PrivateAws | None = None,
        ) -> SonicService:
            built = SonicService(
                self,
                construct_id or id_from_name(name),
                cluster=cluster,
                discovery_name=discovery,
                container=containers[name],
                desired_count=desired,
                subnets=in_subnets,
                metrics_job=metrics_job,
                log_key=log_key,
                log_retention=log_retention,
                volume=volume,
                deployment_alarms=deployment_alarms,
                gpu_placement=placement,
                peer_urls=peer_urls,
                private_aws=private_aws,
            )
            registry.before_use(name, built.service)
            return built

        self.nats = service("nats", "nats", nats_tasks, private_aws=nats_private_aws)
        if nats_tasks > 1:
            # The cluster's routes (nats-server's --cluster/--routes, in the container's command). A route
            # dials a random address of the DNS name and skips itself (nats-io/nats-server server.go,
            # getRandomIP; docs.nats.io "Clustering": self-routes are ignored, gossip completes the mesh).
            route = ec2.Port.tcp(NATS_ROUTE_PORT)
            group = self.nats.security_group
            group.add_ingress_rule(group, route, "NATS routes between the cluster's servers")
            group.add_egress_rule(group, route, "NATS routes between the cluster's servers")
        licence_volume = (
            (offline_licence.store.volume, offline_licence.data_path) if offline_licence is not None else None
        )
        self.licence_proxy = service("licence_proxy", "licence-proxy", 1, volume=licence_volume)
        if offline_licence is not None:
            offline_licence.store.load_into(
                self.licence_proxy,
                loader_image=registry.image("licence_loader"),
                content_type=offline_licence.content_type,
            )
            registry.before_use("licence_loader", self.licence_proxy.service)
        # The API server and workers are told their peers' Cloud Map addresses in the variables config names:
        # an image's own default (a Compose or Helm service name) resolves to nothing here.
        namespace = cluster.default_cloud_map_namespace
        assert namespace is not None, "the cluster's Cloud Map namespace comes first"
        peers = {
            "nats": f"nats://{self.nats.discovery_name}.{namespace.namespace_name}:{self.nats.port}",
            "licence_proxy": f"http://{self.licence_proxy.discovery_name}.{namespace.namespace_name}:"
            f"{self.licence_proxy.port}",
        }
        self.api_server = service(
            "api_server", "api-server", api_tasks, deployment_alarms=api_deployment_alarms, peer_urls=peers
        )
        self.workers = service(
            "gpu_worker",
            "gpu-worker",
            None,
            placement=gpu_placement,
            deployment_alarms=worker_deployment_alarms,
            peer_urls=peers,
        )
        # The fallback AZ's workers: their metrics join the workers' (one fleet to the scaling and alarms).
        self.overflow_workers = (
            service(
                "gpu_worker",
                "gpu-worker-fallback",
                None,
                placement=overflow.gpu_placement,
                deployment_alarms=worker_deployment_alarms,
                construct_id="OverflowWorker",
                in_subnets=overflow.subnets,
                metrics_job=self.workers.discovery_name,
                peer_urls=peers,
            )
            if overflow is not None
            else None
        )
        for client in (self.api_server, *self.gpu_workers):
            self.nats.allow_from(client, f"NATS from {client.discovery_name}")
            self.licence_proxy.allow_from(client, f"licence checks from {client.discovery_name}")

    @property
    def gpu_workers(self) -> list[SonicService]:
        """The GPU worker services: the first AZ's, and the fallback AZ's overflow when there is one."""
        return [self.workers, *([self.overflow_workers] if self.overflow_workers is not None else [])]
