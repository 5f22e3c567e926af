"""What on-call sees and what pages them, per route: the alarms on what callers feel that need the whole
stack (the canary's, no healthy targets, worker tasks waiting for GPU capacity), the composite alarms, and the
route's dashboard.

One incident pages once. Every single alarm is a child without actions (Alerting); three composites page:

- CallersAffected: any alarm on what a caller feels now (slow or failed first audio in the canary, worker
  TTFA, refused requests, no capacity or no healthy target at all, 5XX and 4XX on SageMaker). Pages at once.
- CapacityAtRisk: any alarm on a cause that callers feel next (load above capacity, tasks waiting for a GPU
  instance, GPUs pinned, unhealthy targets). Its actions are suppressed while CallersAffected is in ALARM
  and for SUPPRESSOR_WAIT after it goes in (a cause usually fires minutes before its symptom: the caller page
  then stands for both), and for SUPPRESSOR_EXTENSION after callers recover. It pages alone when capacity is
  short and callers do not feel it yet: the time to act before they do.
- MonitoringBlind: the signals themselves stopped (no GPU metrics, no canary run); suppressed the same way.

The children stay the ECS deployment alarms and FIS stop conditions (EcsStack): those read alarm states, not
actions. docs/operate.md, "Alarms", has each one with what to do first.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from sonic_deploy.config import Settings
from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.constructs.api_load_balancer import ApiLoadBalancer
from sonic_deploy.constructs.canary_alarms import CanaryAlarms, CanaryMetrics
from sonic_deploy.constructs.dashboard import OperationsDashboard, alarm_states, canary_widgets, graph, note
from sonic_deploy.constructs.endpoint_alarms import CONCURRENCY, EndpointAlarms
from sonic_deploy.constructs.gpu_capacity import GROUP_METRICS, GpuCapacity
from sonic_deploy.constructs.sonic_endpoint import SonicEndpoint
from sonic_deploy.constructs.sonic_metrics import SonicMetrics
from sonic_deploy.constructs.sonic_service import SonicService
from sonic_deploy.constructs.worker_alarms import WorkerAlarms

ONE_MINUTE = Duration.minutes(1)


def _canary(scope: Construct, settings: Settings, alerting: Alerting, route: str) -> CanaryAlarms | None:
    if not settings.canary_enabled:
        return None
    canary = settings.environment.canary
    metrics = CanaryMetrics(
        environment=settings.environment_name, route=route, every=Duration.minutes(canary.every_minutes)
    )
    return CanaryAlarms(scope, "CanaryAlarms", alerting=alerting, metrics=metrics, canary=canary)


def _page(
    alerting: Alerting,
    *,
    callers: Sequence[cloudwatch.IAlarm],
    capacity: Sequence[cloudwatch.IAlarm],
    blind: Sequence[cloudwatch.IAlarm],
) -> list[cloudwatch.IAlarm]:
    """The three composites (see the module's docstring); returns them, then every child, for the dashboard."""
    affected = alerting.composite(
        "CallersAffected",
        alarms=callers,
        description="Callers are affected now: slow or failed first audio, or refused requests. The children "
        "in ALARM say which; the dashboard's top row says how badly.",
    )
    composites: list[cloudwatch.IAlarm] = [affected]
    composites.append(
        alerting.composite(
            "CapacityAtRisk",
            alarms=capacity,
            suppressor=affected,
            description="Capacity is short or about to be, and callers do not feel it yet: add capacity or find "
            "what blocks scaling (the children in ALARM; the dashboard's scaling row).",
        )
    )
    if blind:
        composites.append(
            alerting.composite(
                "MonitoringBlind",
                alarms=blind,
                suppressor=affected,
                description="A signal the alarms rely on stopped (GPU metrics, canary runs): alarms on it "
                "cannot fire. The children in ALARM say which.",
            )
        )
    return composites + list(alerting.alarms)


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
    ) -> None:
        super().__init__(scope, construct_id)
        cfg = settings.environment.ecs
        assert cfg is not None
        canary = _canary(self, settings, alerting, "ecs")
        # A quiet NLB reports no metrics at all (Elastic Load Balancing, Network Load Balancers, "CloudWatch
        # metrics": only while requests flow), so missing data is not breaching; the canary's requests keep it
        # reporting, and NoWorkerCapacity covers a fleet that reports nothing.
        self.no_healthy_targets = alerting.alarm(
            "NoHealthyApiTargets",
            metric=load_balancer.healthy_targets(),
            threshold=1,
            evaluation_periods=2,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            description="No API server target passes GET /status: every new connection fails.",
        )
        # Container Insights documents PendingTaskCount as the tasks in PENDING; whether a task still in
        # PROVISIONING (waiting for the capacity provider to launch a GPU instance) counts is not documented,
        # so the alarm takes the larger of it and desired - running, which counts both. MAX of an array of time
        # series is the per-point maximum (CloudWatch User Guide, "Metric math syntax and functions"; the
        # search tool here returned that page without its function table: UNVERIFIED in this repository).
        minutes = cfg.alarms.provisioning_minutes
        waiting = cloudwatch.MathExpression(
            expression="MAX([pending, desired - running])",
            using_metrics={
                "pending": workers.task_count("PendingTaskCount"),
                "desired": workers.task_count("DesiredTaskCount"),
                "running": workers.task_count("RunningTaskCount"),
            },
            label="worker tasks not running",
            period=ONE_MINUTE,
        )
        self.tasks_waiting = alerting.alarm(
            "WorkerTasksWaiting",
            metric=waiting,
            threshold=1,
            evaluation_periods=minutes,
            description=f"A GPU worker task has waited {minutes} minutes to run (PROVISIONING or PENDING): no "
            "GPU instance for it (the G and VT instance quota, capacity in the AZ, max_workers + 1 instances).",
        )
        callers: list[cloudwatch.IAlarm] = [
            worker_alarms.no_capacity,
            worker_alarms.unserviceable,
            worker_alarms.ttfa,
            self.no_healthy_targets,
        ]
        blind: list[cloudwatch.IAlarm] = [worker_alarms.gpu_metrics_missing]
        if canary is not None:
            callers += canary.caller_facing
            blind.append(canary.not_running)
        alarms = _page(
            alerting,
            callers=callers,
            capacity=[
                worker_alarms.capacity_exhausted,
                self.tasks_waiting,
                worker_alarms.gpu_pinned,
                unhealthy_targets,
            ],
            blind=blind,
        )

        streams = metrics.streams()
        canary_metrics = canary.metrics if canary is not None else None
        refused: list[cloudwatch.IMetric] = [
            metrics.sonic_metric("api_unserviceable_requests_size", statistic="Maximum").with_(
                label="unserviceable"
            ),
            metrics.sonic_metric("api_queue_size", statistic="Maximum").with_(label="API queue"),
        ]
        if canary_metrics is not None:
            refused.append(canary_metrics.runs()["Throttled"])
        self.dashboard = OperationsDashboard(
            self,
            "Dashboard",
            dashboard_name=f"{settings.resource_prefix}-ecs",
            rows=[
                [
                    *canary_widgets(
                        canary_metrics,
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
                    graph("Active streams: load vs capacity (chunks)", list(streams.values()), width=6),
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
                        width=8,
                    ),
                    graph(
                        "Scaling: GPU instances",
                        [gpu_capacity.group_metric(metric) for metric in GROUP_METRICS],
                        width=8,
                    ),
                    graph(
                        "Worker tasks waiting for a GPU instance",
                        [waiting, workers.task_count("PendingTaskCount")],
                        width=8,
                        budget=(1, f"alarm after {minutes} min"),
                    ),
                ],
            ],
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
    ) -> None:
        super().__init__(scope, construct_id)
        canary = _canary(self, settings, alerting, "sagemaker")
        callers: list[cloudwatch.IAlarm] = [
            endpoint_alarms.errors_5xx,
            endpoint_alarms.errors_4xx,
            endpoint_alarms.model_latency,
        ]
        blind: list[cloudwatch.IAlarm] = []
        if canary is not None:
            callers += canary.caller_facing
            blind.append(canary.not_running)
        alarms = _page(
            alerting,
            callers=callers,
            capacity=[endpoint_alarms.concurrency, endpoint_alarms.gpu_pinned],
            blind=blind,
        )

        streams = settings.sagemaker_streams_per_instance
        target = streams * settings.environment.sagemaker.target_utilisation
        canary_metrics = canary.metrics if canary is not None else None
        # AWS/SageMaker Invocations and Invocation4XX/5XXErrors, /aws/sagemaker/Endpoints GPUUtilization and
        # GPUMemoryUtilization, dimensions EndpointName and VariantName (SageMaker Developer Guide, "Amazon
        # SageMaker AI metrics in Amazon CloudWatch"; SonicEndpoint.metric).
        errors: list[cloudwatch.IMetric] = [
            endpoint.metric(name, statistic="Sum").with_(label=name)
            for name in ("Invocation4XXErrors", "Invocation5XXErrors")
        ]
        if canary_metrics is not None:
            errors.append(canary_metrics.runs()["Throttled"])
        name = settings.endpoint_name
        self.dashboard = OperationsDashboard(
            self,
            "Dashboard",
            dashboard_name=f"{settings.resource_prefix}-sagemaker",
            rows=[
                [
                    *canary_widgets(
                        canary_metrics,
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
                        [
                            endpoint.metric(CONCURRENCY, statistic="Average").with_(
                                label="concurrent requests"
                            )
                        ],
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
            ],
        )
