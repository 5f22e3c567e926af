"""What on-call sees and what pages them, per route: the alarms on what callers feel that need the whole
stack (the canary's, no healthy targets, worker tasks waiting for GPU capacity), the composite alarms, and the
route's dashboard.

One incident pages once. Every single alarm is a child without actions (Alerting); three composites, also
without actions, group them by the kind of incident:

- CallersAffected: any alarm on what a caller feels now (slow or failed first audio in the canary, worker
  TTFA, refused requests, no capacity or no healthy target at all, 5XX and latency on SageMaker).
- CapacityAtRisk: any alarm on a cause that callers feel next (load at capacity, tasks waiting for a GPU
  instance, GPU launches failing, GPUs pinned, unhealthy targets): the time to act before they do.
- MonitoringBlind: the signals themselves stopped (no worker or GPU metrics, no canary run).

One composite pages: Page, in ALARM while any of the three is. It notifies when it goes into ALARM and when
it is back to OK; a second child going into ALARM while it is in ALARM pages no one (a composite acts on its
own state changes), and the dashboard's alarm widget shows which children are in ALARM. SageMaker's
Invocation4XXErrors is in no composite: it mixes clients' 422s with 429s, so it is shown, never paged; 429s
page through ConcurrencyAboveCapacity and, with the canary on, CanaryFailures (throttled runs fail).

The children stay the ECS deployment alarms and FIS stop conditions (EcsStack): those read alarm states, not
actions. docs/operate.md, "Operating sonic-deploy", has each one with what to do first.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from sonic_deploy.config import Settings
from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.constructs.api_load_balancer import ApiLoadBalancer
from sonic_deploy.constructs.canary_alarms import CanaryAlarms, CanaryMetrics
from sonic_deploy.constructs.capacity_events import CapacityEvents
from sonic_deploy.constructs.dashboard import OperationsDashboard, ecs_rows, sagemaker_rows
from sonic_deploy.constructs.endpoint_alarms import EndpointAlarms
from sonic_deploy.constructs.gpu_capacity import GpuCapacity
from sonic_deploy.constructs.gpu_fallback import GpuFallback
from sonic_deploy.constructs.probe_canary import ProbeCanary
from sonic_deploy.constructs.sonic_endpoint import SonicEndpoint
from sonic_deploy.constructs.sonic_metrics import SonicMetrics
from sonic_deploy.constructs.sonic_service import SonicService
from sonic_deploy.constructs.worker_alarms import WorkerAlarms

ONE_MINUTE = Duration.minutes(1)


def _canary(
    scope: Construct, settings: Settings, alerting: Alerting, route: str, schedule: ProbeCanary | None
) -> CanaryAlarms | None:
    if schedule is None:
        return None
    canary = settings.environment.canary
    metrics = CanaryMetrics(
        environment=settings.environment_name, route=route, every=Duration.minutes(canary.every_minutes)
    )
    return CanaryAlarms(
        scope,
        "CanaryAlarms",
        alerting=alerting,
        metrics=metrics,
        canary=canary,
        failed_starts=schedule.failed_starts(),
    )


def _page(
    alerting: Alerting,
    *,
    callers: Sequence[cloudwatch.IAlarm],
    capacity: Sequence[cloudwatch.IAlarm],
    blind: Sequence[cloudwatch.IAlarm],
) -> list[cloudwatch.IAlarm]:
    """The three group composites and Page (see the module's docstring); returns Page, the groups, then
    every child, for the dashboard."""
    groups = [
        alerting.composite(
            "CallersAffected",
            alarms=callers,
            description="Callers are affected now: slow or failed first audio, or refused requests. The children "
            "in ALARM say which; the dashboard's top row says how badly.",
        ),
        alerting.composite(
            "CapacityAtRisk",
            alarms=capacity,
            description="Capacity is short or about to be: add capacity or find what blocks scaling (the "
            "children in ALARM; the dashboard's scaling row).",
        ),
    ]
    if blind:
        groups.append(
            alerting.composite(
                "MonitoringBlind",
                alarms=blind,
                description="A signal the alarms rely on stopped (worker or GPU metrics, canary runs): alarms on "
                "it cannot fire. The children in ALARM say which.",
            )
        )
    page = alerting.page(
        "Page",
        alarms=groups,
        description="The one alarm that pages: the composites in ALARM name the kind of incident "
        "(CallersAffected, CapacityAtRisk, MonitoringBlind), their children in ALARM the cause (the dashboard's "
        "alarm widget). While this is in ALARM, a further child in ALARM does not page again.",
    )
    return [page, *groups, *alerting.alarms]


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
        canary = _canary(self, settings, alerting, "ecs", canary_schedule)
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
        alarms = _page(alerting, callers=callers, capacity=at_risk, blind=blind)

        self.dashboard = OperationsDashboard(
            self,
            "Dashboard",
            dashboard_name=f"{settings.resource_prefix}-ecs",
            rows=ecs_rows(
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
        )


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
        canary = _canary(self, settings, alerting, "sagemaker", canary_schedule)
        # Not errors_4xx: a child shown on the dashboard, in no composite (the module's docstring).
        callers: list[cloudwatch.IAlarm] = [endpoint_alarms.errors_5xx, endpoint_alarms.model_latency]
        blind: list[cloudwatch.IAlarm] = []
        if canary is not None:
            callers += canary.caller_facing
            blind += canary.blind
        alarms = _page(
            alerting,
            callers=callers,
            capacity=[endpoint_alarms.concurrency, endpoint_alarms.gpu_pinned],
            blind=blind,
        )

        self.dashboard = OperationsDashboard(
            self,
            "Dashboard",
            dashboard_name=f"{settings.resource_prefix}-sagemaker",
            rows=sagemaker_rows(
                settings=settings,
                canary=canary.metrics if canary is not None else None,
                endpoint=endpoint,
                gpus_per_instance=gpus_per_instance,
                alarms=alarms,
            ),
        )
