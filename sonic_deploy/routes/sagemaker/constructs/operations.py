"""The SageMaker route's operations: its canary alarms, its composites and its dashboard
(sonic_deploy/constructs/operations.py says how the composites page; Errors4xx is in none)."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from sonic_deploy.config import Settings
from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.constructs.dashboard import OperationsDashboard
from sonic_deploy.constructs.operations import agent_for, canary_alarms_for, page_composites
from sonic_deploy.constructs.probe_canary import ProbeCanary
from sonic_deploy.routes.sagemaker.constructs.dashboard import sagemaker_rows
from sonic_deploy.routes.sagemaker.constructs.endpoint_alarms import EndpointAlarms
from sonic_deploy.routes.sagemaker.constructs.sonic_endpoint import SonicEndpoint


class SageMakerOperations(Construct):
    """The SageMaker route's canary alarms, its composites and its dashboard."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        alerting: Alerting,
        endpoint: SonicEndpoint,
        endpoint_alarms: EndpointAlarms,
        gpus_per_instance: int,
        canary_schedule: ProbeCanary | None,
    ) -> None:
        """`canary_schedule`: the canary (None when `[canary]` is off): its alarms join the composites."""
        super().__init__(scope, construct_id)
        canary = canary_alarms_for(self, settings, alerting, "sagemaker", canary_schedule)
        # Not errors_4xx: a child shown on the dashboard, in no composite (the docstring of
        # sonic_deploy/constructs/operations.py).
        callers: list[cloudwatch.IAlarm] = [endpoint_alarms.errors_5xx, endpoint_alarms.model_latency]
        blind: list[cloudwatch.IAlarm] = []
        if canary is not None:
            callers += canary.caller_facing
            blind += canary.blind
        agent = agent_for(self, settings, alerting, "sagemaker")
        if agent is not None:
            callers += agent.alarms.caller_facing
        alarms = page_composites(
            alerting,
            callers=callers,
            capacity=[
                endpoint_alarms.concurrency,
                endpoint_alarms.gpu_pinned,
                *([endpoint_alarms.fallback_in_use] if endpoint_alarms.fallback_in_use is not None else []),
            ],
            blind=blind,
        )

        self.dashboard = OperationsDashboard(
            self,
            "Dashboard",
            dashboard_name=f"{settings.resource_prefix}-sagemaker",
            rows=[
                *sagemaker_rows(
                    settings=settings,
                    canary=canary.metrics if canary is not None else None,
                    endpoint=endpoint,
                    gpus_per_instance=gpus_per_instance,
                    alarms=alarms,
                ),
                *([agent.row] if agent is not None else []),
            ],
        )
