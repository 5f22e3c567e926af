"""The ECS route's operations: the caller alarms that need the load balancer and the worker service, its
composites and its dashboard (sonic_deploy/constructs/operations.py says how the composites page)."""

from __future__ import annotations

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from sonic_deploy.config import Settings
from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.constructs.api_load_balancer import ApiLoadBalancer
from sonic_deploy.constructs.dashboard import OperationsDashboard
from sonic_deploy.constructs.operations import agent_for, canary_alarms_for, page_composites
from sonic_deploy.constructs.probe_canary import ProbeCanary
from sonic_deploy.routes.ecs.constructs.capacity_events import CapacityEvents
from sonic_deploy.routes.ecs.constructs.dashboard import ecs_rows
from sonic_deploy.routes.ecs.constructs.gpu_capacity import GpuCapacity
from sonic_deploy.routes.ecs.constructs.gpu_fallback import GpuFallback
from sonic_deploy.routes.ecs.constructs.sonic_metrics import SonicMetrics
from sonic_deploy.routes.ecs.constructs.sonic_service import SonicService
from sonic_deploy.routes.ecs.constructs.worker_alarms import WorkerAlarms


class EcsOperations(Construct):
    """The ECS route's caller alarms that need the load balancer and the worker service, its composites and
    its dashboard."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        settings: Settings,
        alerting: Alerting,
        metrics: SonicMetrics,
        worker_alarms: WorkerAlarms,
        unhealthy_targets: cloudwatch.IAlarm,
        load_balancer: ApiLoadBalancer,
        workers: SonicService,
        gpu_capacity: GpuCapacity,
        fallback: GpuFallback | None = None,
        canary_schedule: ProbeCanary | None,
        key: kms.IKey,
        log_retention: logs.RetentionDays,
        licence_load_failures: cloudwatch.IMetric | None = None,
    ) -> None:
        """`canary_schedule`: the canary (None when `[canary]` is off): its alarms join the composites.
        `fallback`: the fallback AZ's GPU group and overflow workers, when configured: their launches and
        placements join the capacity events, FallbackInUse joins CapacityAtRisk.
        `key`, `log_retention`: the stack's, for the log of failed GPU launches and task placements.
        `licence_load_failures` (air-gapped): the licence loader's give-ups; LicenceNotLoaded joins
        CapacityAtRisk (the proxy runs on the licence it kept until that expires: callers feel it next)."""
        super().__init__(scope, construct_id)
        cfg = settings.environment.ecs
        assert cfg is not None
        canary = canary_alarms_for(self, settings, alerting, "ecs", canary_schedule)
        # A quiet NLB reports no metrics at all (Elastic Load Balancing, Network Load Balancers, "CloudWatch
        # metrics": only while requests flow), so missing data is not breaching; the canary's requests keep it
        # reporting, and WorkerMetricsMissing covers a fleet that reports nothing.
        self.no_healthy_targets = alerting.alarm(
            "NoHealthyApiTargets",
            metric=load_balancer.healthy_targets(),
            threshold=1,
            evaluation_periods=2,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            description="No API server target passes GET /status: every new connection fails.",
        )
        minutes = cfg.alarms.provisioning_minutes
        waiting = workers.tasks_not_running()
        self.tasks_waiting = alerting.alarm(
            "WorkerTasksWaiting",
            metric=waiting,
            threshold=1,
            evaluation_periods=minutes,
            description=f"A GPU worker task has not been running for {minutes} minutes: waiting for a GPU "
            "instance (PROVISIONING or PENDING: the G and VT instance quota, capacity in the AZ, max_workers + 1 "
            "instances), or crash-looping or stopping (the service's events and the stopped tasks' reasons).",
        )
        # Why tasks wait: the GPU groups' failed launches and the workers' failed placements, with AWS's reason.
        capacities = [gpu_capacity, *([fallback.capacity] if fallback is not None else [])]
        overflow = [fallback.overflow] if fallback is not None and fallback.overflow is not None else []
        self.capacity_events = CapacityEvents(
            self,
            "CapacityEvents",
            groups=[capacity.auto_scaling_group for capacity in capacities],
            services=[service.service for service in (workers, *overflow)],
            key=key,
            log_retention=log_retention,
            alerting=alerting,
        )
        callers: list[cloudwatch.IAlarm] = [
            worker_alarms.no_capacity,
            worker_alarms.unserviceable,
            worker_alarms.ttfa,
            self.no_healthy_targets,
        ]
        blind: list[cloudwatch.IAlarm] = [
            worker_alarms.worker_metrics_missing,
            worker_alarms.gpu_metrics_missing,
        ]
        if canary is not None:
            callers += canary.caller_facing
            blind += canary.blind
        agent = agent_for(self, settings, alerting, "ecs")
        if agent is not None:
            callers += agent.alarms.caller_facing
        at_risk: list[cloudwatch.IAlarm] = [
            worker_alarms.capacity_exhausted,
            self.tasks_waiting,
            self.capacity_events.launches_failing,
            worker_alarms.gpu_pinned,
            unhealthy_targets,
            *([fallback.in_use] if fallback is not None else []),
        ]
        if licence_load_failures is not None:
            at_risk.append(
                alerting.alarm(
                    "LicenceNotLoaded",
                    metric=licence_load_failures,
                    threshold=1,
                    description="The licence loader gave up: a licence proxy task (started by a deploy, "
                    "`make licence` or ECS replacing it) did not take the offline licence. The proxy's log "
                    "group says why; run `make licence` again once it answers.",
                )
            )
        alarms = page_composites(alerting, callers=callers, capacity=at_risk, blind=blind)

        self.dashboard = OperationsDashboard(
            self,
            "Dashboard",
            dashboard_name=f"{settings.resource_prefix}-ecs",
            rows=[
                *ecs_rows(
                    settings=settings,
                    canary=canary.metrics if canary is not None else None,
                    metrics=metrics,
                    load_balancer=load_balancer,
                    workers=workers,
                    gpu_capacities=capacities,
                    waiting=waiting,
                    capacity_events=self.capacity_events,
                    alarms=alarms,
                ),
                *([agent.row] if agent is not None else []),
            ],
        )
