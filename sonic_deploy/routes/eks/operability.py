"""What operates the EKS route: the probe task and its canary (the shared Fargate task, in the route's VPC and
AZ, calling the NLB as agents do: docs/eks.md section 6), the alarms, the composites that page and the
dashboard (EksOperations)."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2

from sonic_deploy.config import Settings
from sonic_deploy.config.cartesia import Listener
from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.routes.eks.constructs.operations import EksMetrics, EksOperations
from sonic_deploy.routes.eks.foundation import Foundation
from sonic_deploy.routes.eks.services import Services
from sonic_deploy.stacks.common import probe_and_canary


def operate(
    stack: Stack, settings: Settings, base: Foundation, services: Services, api: Listener, *, model_id: str
) -> EksOperations:
    """Builds Alerting, Probe and Canary (`probe_and_canary`, with a probe cluster of its own: the route's
    cluster is Kubernetes), then Operations."""
    cfg = settings.environment.eks
    assert cfg is not None
    lb = services.load_balancer
    target = ["probe", "ws", "--url", lb.websocket_url, "--model-id", model_id]
    # The canary's metrics carry Route=eks (a ws probe's default is ecs): EksOperations alarms on them.
    target += ["--cartesia-version", cfg.cartesia_version, "--publish-route", "eks"]
    canary = probe_and_canary(
        stack,
        settings,
        "eks",
        network=base.network,
        subnets=base.placement.subnets,
        key=base.key,
        target=target,
        calls_in_vpc=[ec2.Port.tcp(api.port)],
        secrets={"CARTESIA_API_KEY": base.secrets.for_task("api_key")},
    )
    alerting = Alerting(stack, "Alerting", key=base.key, emails=cfg.alarms.email)
    return EksOperations(
        stack,
        "Operations",
        settings=settings,
        alerting=alerting,
        metrics=EksMetrics(base.cluster.name),
        load_balancer=lb,
        canary_schedule=canary,
    )
