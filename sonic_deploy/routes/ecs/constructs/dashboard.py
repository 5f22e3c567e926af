"""The ECS route's dashboard rows, for OperationsDashboard (sonic_deploy/constructs/dashboard.py, which draws
the widgets both routes share; docs/operate.md, "Dashboard")."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_cloudwatch as cloudwatch

from sonic_deploy.config import Settings
from sonic_deploy.constructs.api_load_balancer import ApiLoadBalancer
from sonic_deploy.constructs.canary_alarms import CanaryMetrics
from sonic_deploy.constructs.dashboard import HEIGHT, alarm_states, canary_widgets, graph
from sonic_deploy.routes.ecs.constructs.capacity_events import (
    QUERY_FIELDS,
    QUERY_LIMIT,
    WIDGET_TITLE,
    CapacityEvents,
)
from sonic_deploy.routes.ecs.constructs.gpu_capacity import GROUP_METRICS, GpuCapacity
from sonic_deploy.routes.ecs.constructs.sonic_metrics import SonicMetrics
from sonic_deploy.routes.ecs.constructs.sonic_service import SonicService

ONE_MINUTE = Duration.minutes(1)


def ecs_rows(
    *,
    settings: Settings,
    canary: CanaryMetrics | None,
    metrics: SonicMetrics,
    load_balancer: ApiLoadBalancer,
    workers: SonicService,
    gpu_capacities: Sequence[GpuCapacity],
    waiting: cloudwatch.IMetric,
    capacity_events: CapacityEvents,
    alarms: Sequence[cloudwatch.IAlarm],
) -> list[list[cloudwatch.IWidget]]:
    """The ECS dashboard: canary, worker TTFA, alarms; streams, refusals, targets, GPUs; scaling, and why
    GPU capacity is short."""
    cfg = settings.environment.ecs
    assert cfg is not None
    minutes = cfg.alarms.provisioning_minutes
    streams = metrics.streams()
    refused: list[cloudwatch.IMetric] = [
        metrics.sonic_metric("api_unserviceable_requests_size", statistic="Maximum").with_(
            label="unserviceable"
        ),
        metrics.sonic_metric("api_queue_size", statistic="Maximum").with_(label="API queue"),
    ]
    if canary is not None:
        refused.append(canary.runs()["Throttled"])
    return [
        [
            *canary_widgets(
                canary,
                budget_ms=settings.environment.canary.ttfa_p95_ms,
                environment=settings.environment_name,
                width=6,
            ),
            graph(
                f"Workers: time to first audio ({metrics.worker_ttfa.statistic}, ms)",
                [metrics.worker_ttfa_ms(period=ONE_MINUTE)],
                width=6,
                left_label="ms",
                budget=(cfg.alarms.worker_ttfa_p95_ms, f"alarm {cfg.alarms.worker_ttfa_p95_ms:g} ms"),
            ),
            alarm_states(alarms, width=6),
        ],
        [
            # The ratio, not the two sums: the scraper samples every 10 s, so a one-minute Sum adds about six
            # samples per worker (sonic_metrics.COLLECTION_INTERVAL_S); in the ratio they cancel.
            graph(
                "Active streams: worker load / capacity",
                [
                    cloudwatch.MathExpression(
                        expression="load / capacity",
                        using_metrics=dict(streams),
                        label="load / capacity",
                        period=ONE_MINUTE,
                    )
                ],
                width=6,
                annotations=[
                    (cfg.target_utilisation, f"scaling target {cfg.target_utilisation:g}"),
                    (1, f"full (alarm after {cfg.alarms.capacity_minutes} min)"),
                ],
            ),
            graph("Refused and queued (TCP NLB: no status codes)", refused, width=6),
            graph(
                "API targets",
                [load_balancer.healthy_targets().with_(label="healthy")],
                right=[load_balancer.unhealthy_targets().with_(label="unhealthy")],
                width=6,
            ),
            graph(
                "GPUs (%)",
                [
                    metrics.gpu_utilisation().with_(label="GPU utilisation %"),
                    metrics.gpu_memory_percent(),
                ],
                width=6,
                left_label="%",
            ),
        ],
        [
            graph(
                "Scaling: worker tasks",
                [workers.task_count(name) for name in ("DesiredTaskCount", "RunningTaskCount")],
                width=4,
            ),
            graph(
                "Scaling: GPU instances",
                [gpu_capacities[0].group_metric(metric) for metric in GROUP_METRICS]
                # The fallback AZ's, when there is one: instances there mean the first AZ ran short.
                + [
                    capacity.group_metric(autoscaling.GroupMetric.IN_SERVICE_INSTANCES).with_(
                        label="fallback AZ in service"
                    )
                    for capacity in gpu_capacities[1:]
                ],
                width=4,
            ),
            graph(
                "Worker tasks waiting for a GPU instance",
                [waiting, workers.task_count("PendingTaskCount")],
                width=4,
                budget=(1, f"alarm after {minutes} min"),
            ),
            # Events not logged (right axis) would leave the log widget empty while launches fail.
            graph(
                "Failed launches, placements (5 min)",
                [capacity_events.launches_failed(), capacity_events.placements_failed()],
                right=capacity_events.deliveries_failed(),
                width=4,
                budget=(1, "launches: alarm"),
            ),
            cloudwatch.LogQueryWidget(
                title=WIDGET_TITLE,
                log_group_names=[capacity_events.log_group.log_group_name],
                query_lines=[
                    f"fields {', '.join(QUERY_FIELDS)}",
                    "sort @timestamp desc",
                    f"limit {QUERY_LIMIT}",
                ],
                view=cloudwatch.LogQueryVisualizationType.TABLE,
                width=8,
                height=HEIGHT,
            ),
        ],
    ]
