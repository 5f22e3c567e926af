"""The self-managed route: Cartesia's services on ECS, GPU workers in one AZ behind a private NLB."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from constructs import Construct

from sonic_deploy.config import Settings
from sonic_deploy.constructs.encryption import EncryptionKey
from sonic_deploy.constructs.naming import id_from_name
from sonic_deploy.constructs.placement import SingleAzPlacement
from sonic_deploy.constructs.registry import ImageSource
from sonic_deploy.routes.ecs import outputs
from sonic_deploy.routes.ecs.fleet import GpuFleet
from sonic_deploy.routes.ecs.foundation import Foundation
from sonic_deploy.routes.ecs.operability import operate, rehearse
from sonic_deploy.routes.ecs.services import Services
from sonic_deploy.stacks.common import SonicStack, log_retention, network_props


class EcsStack(SonicStack):
    """The route's parts (foundation.py, fleet.py, services.py, operability.py beside this module), each
    building its children straight under the stack, in the order the template has always had: the
    foundation, the GPU fleet, the services, what operates them, the outputs, the resilience rehearsal."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, settings=settings, **kwargs)
        env = settings.environment
        cfg = env.ecs
        assert cfg is not None  # the loader guarantees it for this route
        retention = log_retention(env.log_retention_days)

        key = EncryptionKey(self, "Encryption", alias=f"alias/{settings.resource_prefix}-ecs").key
        base = Foundation(
            self,
            cfg,
            key=key,
            flow_log_retention=log_retention(env.network.flow_log_retention_days),
            log_retention=retention,
            log_retention_days=env.log_retention_days,
            turn_hops=env.probe.turn_hops,
            placement=network_props(self, settings, "ecs"),
            images={
                name: ImageSource(
                    s.source, s.tag, settings.ecr_repository(name, "ecs"), s.private_registry, digest=s.digest
                )
                for name, s in settings.ecs_services.items()
            },
        )
        fleet = GpuFleet(self, cfg, base, log_retention=retention)
        services = Services(
            self,
            cfg,
            base,
            fleet,
            log_retention=retention,
            licence_secret_name=settings.licence_secret_name(cfg.secrets),
            vpc_cidr=settings.route_cidr("ecs"),
            listener_port=settings.ecs_listener_port,
            tls=settings.ecs_tls,
            deletion_protection=settings.ecs_deletion_protection,
            client_cidrs=env.network.client_cidrs,
            plaintext_accepted_by=settings.ecs_plaintext_accepted_by,
        )
        operate(self, settings, base, fleet, services, log_retention=retention)

        lb = services.load_balancer
        CfnOutput(self, outputs.API_URL, value=lb.websocket_url)
        CfnOutput(self, outputs.LOAD_BALANCER_DNS_NAME, value=lb.load_balancer.load_balancer_dns_name)
        # What an agent needs besides the URL (`sonic-deploy connect` reads them): the key's secret by name,
        # never its value.
        CfnOutput(self, outputs.MODEL_ID, value=settings.ecs_model_id)
        CfnOutput(self, outputs.CARTESIA_VERSION, value=cfg.cartesia_version)
        CfnOutput(self, outputs.API_KEY_SECRET, value=cfg.secrets.api_key)
        CfnOutput(self, outputs.REGION, value=self.region)
        CfnOutput(self, outputs.CLUSTER_NAME, value=fleet.cluster.cluster_name)
        CfnOutput(self, outputs.AVAILABILITY_ZONE, value=base.placement.availability_zone)
        # For a capacity reservation made for the stack's placement groups (docs/capacity.md).
        _placement_outputs(self, "", base.placement)
        if fleet.fallback is not None:
            _placement_outputs(self, outputs.FALLBACK_PREFIX, fleet.fallback.placement)
        for name, repository in base.registry.repositories.items():
            CfnOutput(self, f"{id_from_name(name)}Repository", value=repository.repository_uri)
        rehearse(self, cfg, base, fleet, services, log_retention=retention)


def _placement_outputs(stack: Stack, prefix: str, placement: SingleAzPlacement) -> None:
    """<prefix>PlacementGroupName and -Arn, and the fallback's AZ (the first's is AvailabilityZone)."""
    CfnOutput(
        stack, f"{prefix}{outputs.PLACEMENT_GROUP_NAME}", value=placement.placement_group.placement_group_name
    )
    CfnOutput(stack, f"{prefix}{outputs.PLACEMENT_GROUP_ARN}", value=placement.placement_group_arn)
    if prefix:
        CfnOutput(stack, f"{prefix}{outputs.AVAILABILITY_ZONE}", value=placement.availability_zone)
