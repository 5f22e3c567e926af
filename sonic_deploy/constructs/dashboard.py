"""One CloudWatch dashboard per stack, on one screen: three rows of 6 grid units on CloudWatch's 24-column
grid, what callers feel on top, capacity in the middle, scaling at the bottom.

The widgets read the metrics the other constructs expose (SonicMetrics, SonicService, GpuCapacity,
ApiLoadBalancer, SonicEndpoint, CanaryMetrics, CapacityEvents); none spells a metric name of its own. docs/operate.md,
"Dashboard", says what each widget shows and what normal looks like; `python -m sonic_deploy.dashboard_render`
draws one offline from the synthesized body.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from sonic_deploy.config import Settings
from sonic_deploy.constructs.api_load_balancer import ApiLoadBalancer
from sonic_deploy.constructs.canary_alarms import CanaryMetrics
from sonic_deploy.constructs.capacity_events import QUERY_FIELDS, QUERY_LIMIT, WIDGET_TITLE, CapacityEvents
from sonic_deploy.constructs.endpoint_alarms import CONCURRENCY
from sonic_deploy.constructs.gpu_capacity import GROUP_METRICS, GpuCapacity
from sonic_deploy.constructs.sonic_endpoint import SonicEndpoint
from sonic_deploy.constructs.sonic_metrics import SonicMetrics
from sonic_deploy.constructs.sonic_service import SonicService

ONE_MINUTE = Duration.minutes(1)
HEIGHT = 6  # grid units: three rows fill a laptop screen
FULL_WIDTH = 24  # CloudWatch's dashboard grid


def graph(
    title: str,
    left: Sequence[cloudwatch.IMetric],
    *,
    width: int,
    right: Sequence[cloudwatch.IMetric] = (),
    left_label: str = "",
    right_label: str = "",
    budget: tuple[float, str] | None = None,
    annotations: Sequence[tuple[float, str]] = (),
    stacked: bool = False,
) -> cloudwatch.GraphWidget:
    """A time-series widget; `budget` (or each of `annotations`) is a horizontal line (value, label) drawn over
    the left axis."""
    lines = [*([budget] if budget else []), *annotations]
    return cloudwatch.GraphWidget(
        title=title,
        left=list(left),
        right=list(right),
        width=width,
        height=HEIGHT,
        left_y_axis=cloudwatch.YAxisProps(label=left_label, show_units=False, min=0),
        right_y_axis=cloudwatch.YAxisProps(label=right_label, show_units=False, min=0) if right else None,
        left_annotations=[cloudwatch.HorizontalAnnotation(value=value, label=label) for value, label in lines]
        or None,
        stacked=stacked,
    )


def note(markdown: str, *, width: int) -> cloudwatch.TextWidget:
    return cloudwatch.TextWidget(markdown=markdown, width=width, height=HEIGHT)


def canary_widgets(
    canary: CanaryMetrics | None, *, budget_ms: float | None, environment: str, width: int
) -> list[cloudwatch.IWidget]:
    """Canary first audio (p50, p95, the budget) and its runs (succeeded, failed, throttled); with the canary
    off, one note (twice as wide) that says so and how to turn it on, rather than two empty graphs."""
    if canary is None:
        return [
            note(
                "### Canary: off\n"
                "No first-audio or success figures through the callers' path in this environment. Turn it on "
                f"with `enabled = true` under `[canary]` in `config/environments/{environment}.toml`, then "
                'deploy (docs/operate.md, "Dashboard").',
                width=2 * width,
            )
        ]
    assert budget_ms is not None
    return [
        graph(
            "Canary: time to first audio (ms)",
            [canary.ttfa_ms("p50"), canary.ttfa_ms("p95")],
            width=width,
            left_label="ms",
            budget=(budget_ms, f"budget p95 {budget_ms:g} ms"),
        ),
        graph("Canary: requests per run", list(canary.runs().values()), width=width, left_label="requests"),
    ]


def alarm_states(alarms: Sequence[cloudwatch.IAlarm], *, width: int) -> cloudwatch.AlarmStatusWidget:
    return cloudwatch.AlarmStatusWidget(
        title="Alarms: Page pages, the rest say why (latest change first)",
        alarms=list(alarms),
        width=width,
        height=HEIGHT,
        sort_by=cloudwatch.AlarmStatusWidgetSortBy.STATE_UPDATED_TIMESTAMP,
    )


class OperationsDashboard(Construct):
    """A dashboard from rows of widgets (each row's widths add up to FULL_WIDTH)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        dashboard_name: str,
        rows: Sequence[Sequence[cloudwatch.IWidget]],
    ) -> None:
        super().__init__(scope, construct_id)
        for row in rows:
            width = sum(widget.width for widget in row)
            if width != FULL_WIDTH:
                raise ValueError(
                    f"dashboard {dashboard_name}: a row is {width} columns wide, not {FULL_WIDTH}"
                )
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=dashboard_name,
            default_interval=Duration.hours(3),
            widgets=[list(row) for row in rows],
        )


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


def sagemaker_rows(
    *,
    settings: Settings,
    canary: CanaryMetrics | None,
    endpoint: SonicEndpoint,
    gpus_per_instance: int,
    alarms: Sequence[cloudwatch.IAlarm],
) -> list[list[cloudwatch.IWidget]]:
    """The SageMaker dashboard: canary, latency, alarms; concurrency, errors, GPUs, the instance note."""
    streams = settings.sagemaker_streams_per_instance
    target = streams * settings.environment.sagemaker.target_utilisation
    # AWS/SageMaker Invocations and Invocation4XX/5XXErrors, /aws/sagemaker/Endpoints GPUUtilization and
    # GPUMemoryUtilization, dimensions EndpointName and VariantName (SageMaker Developer Guide, "Amazon
    # SageMaker AI metrics in Amazon CloudWatch"; SonicEndpoint.metric).
    errors: list[cloudwatch.IMetric] = [
        endpoint.metric(name, statistic="Sum").with_(label=name)
        for name in ("Invocation4XXErrors", "Invocation5XXErrors")
    ]
    if canary is not None:
        errors.append(canary.runs()["Throttled"])
    name = settings.endpoint_name
    return [
        [
            *canary_widgets(
                canary,
                budget_ms=settings.environment.canary.ttfa_p95_ms,
                environment=settings.environment_name,
                width=6,
            ),
            graph(
                "Endpoint: model and overhead latency (ms)",
                [
                    endpoint.latency_ms(metric, statistic)
                    for metric in ("ModelLatency", "OverheadLatency")
                    for statistic in ("p50", "p95")
                ],
                width=6,
                left_label="ms",
            ),
            alarm_states(alarms, width=6),
        ],
        [
            graph(
                "Active streams per instance vs capacity",
                [endpoint.metric(CONCURRENCY, statistic="Average").with_(label="concurrent requests")],
                width=6,
                budget=(streams, f"capacity {streams} per instance"),
            ),
            graph(
                "Requests and errors (429 is a 4XX)",
                [endpoint.metric("Invocations", statistic="Sum").with_(label="Invocations")],
                right=errors,
                width=6,
            ),
            graph(
                f"GPUs (%, summed over {gpus_per_instance} per instance)",
                [
                    endpoint.metric(metric, instance_metric=True).with_(label=metric)
                    for metric in ("GPUUtilization", "GPUMemoryUtilization")
                ],
                width=6,
                left_label="%",
            ),
            note(
                "### Instances and scaling\n"
                "SageMaker publishes no instance count to CloudWatch (its endpoint metrics are "
                "invocations, latency and utilisation). Current and desired counts: "
                f"`aws sagemaker describe-endpoint --endpoint-name {name}` "
                "(`ProductionVariants[].CurrentInstanceCount`, `DesiredInstanceCount`); scaling activity: "
                "`aws application-autoscaling describe-scaling-activities --service-namespace sagemaker`. "
                f"Scaling aims at {target:g} concurrent requests per instance.",
                width=6,
            ),
        ],
    ]
