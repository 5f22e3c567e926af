"""The EKS route: Cartesia's services on an EKS cluster (made here, or one named in config), GPU workers on
Karpenter's nodes in one AZ and one placement group, behind the stack's internal NLB (docs/eks.md)."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput
from constructs import Construct

from sonic_deploy.config import Settings
from sonic_deploy.config.cartesia import listener, services_run
from sonic_deploy.constructs.encryption import EncryptionKey
from sonic_deploy.constructs.naming import id_from_name
from sonic_deploy.constructs.registry import ImageSource
from sonic_deploy.routes.eks import outputs
from sonic_deploy.routes.eks.capacity import GPU_NODES, Capacity
from sonic_deploy.routes.eks.foundation import Foundation
from sonic_deploy.routes.eks.operability import operate
from sonic_deploy.routes.eks.services import Services
from sonic_deploy.stacks.common import SonicStack, log_retention, network_props


class EksStack(SonicStack):
    """The route's parts (foundation.py, services.py, operability.py beside this module), each building its
    children straight under the stack: the foundation with the cluster, the services and their load balancer,
    what operates them, the outputs."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings, **kwargs: Any) -> None:
        super().__init__(scope, construct_id, settings=settings, **kwargs)
        env = settings.environment
        cfg = env.eks
        assert cfg is not None  # the loader guarantees it for this route
        api = listener("eks", cfg.api, cfg.listener_port, settings.environment_name)
        model_id = cfg.model_id or env.sonic_version

        key = EncryptionKey(self, "Encryption", alias=f"alias/{settings.resource_prefix}-eks").key
        base = Foundation(
            self,
            cfg,
            key=key,
            flow_log_retention=log_retention(env.network.flow_log_retention_days),
            log_retention_days=env.log_retention_days,
            placement=network_props(self, settings, "eks"),
            cluster_name=settings.resource_prefix,
            images={
                name: ImageSource(
                    s.source, s.tag, settings.ecr_repository(name, "eks"), s.private_registry, digest=s.digest
                )
                for name, s in services_run(cfg.services, cfg.licence_mode).items()
            },
        )
        Capacity(self, cfg, base, tags=env.tags)
        services = Services(
            self,
            cfg,
            base,
            api,
            vpc_cidr=settings.route_cidr("eks"),
            client_cidrs=env.network.client_cidrs,
            metrics_log_retention=log_retention(env.log_retention_days),
            region=self.region,
            gpu_nodes=GPU_NODES,
            licence_secret=settings.licence_secret_name(cfg.secrets),
        )
        operate(self, settings, base, services, api, model_id=model_id)

        lb = services.load_balancer
        CfnOutput(self, outputs.API_URL, value=lb.websocket_url)
        CfnOutput(self, outputs.LOAD_BALANCER_DNS_NAME, value=lb.load_balancer.load_balancer_dns_name)
        CfnOutput(self, outputs.MODEL_ID, value=model_id)
        CfnOutput(self, outputs.CARTESIA_VERSION, value=cfg.cartesia_version)
        CfnOutput(self, outputs.API_KEY_SECRET, value=cfg.secrets.api_key)
        CfnOutput(self, outputs.REGION, value=self.region)
        CfnOutput(self, outputs.CLUSTER_NAME, value=base.cluster.cluster.cluster_name)
        CfnOutput(self, outputs.NAMESPACE, value=cfg.namespace)
        CfnOutput(self, outputs.AVAILABILITY_ZONE, value=base.placement.availability_zone)
        CfnOutput(
            self, outputs.PLACEMENT_GROUP_NAME, value=base.placement.placement_group.placement_group_name
        )
        CfnOutput(self, outputs.PLACEMENT_GROUP_ARN, value=base.placement.placement_group_arn)
        for name, repository in base.registry.repositories.items():
            CfnOutput(self, f"{id_from_name(name)}Repository", value=repository.repository_uri)
