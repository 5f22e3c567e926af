"""Alarms of the ECS route on the metrics SonicMetrics publishes."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.constructs.sonic_metrics import SonicMetrics

ABOVE = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
# A new GPU host boots, installs the agent and reports within a few minutes.
GPU_METRICS_GRACE_MINUTES = 15


class WorkerAlarms(Construct):
    """No worker capacity, unserviceable requests, worker TTFA p95, capacity exhausted, GPU pinned and GPU
    metrics missing. The unserviceable and TTFA alarms double as deployment alarms: they do not depend on the
    services they guard. None has actions of its own: the route's composites page (EcsOperations)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        alerting: Alerting,
        metrics: SonicMetrics,
        ttfa_p95_ms: float,
        gpu_pinned_percent: float,
        gpu_pinned_minutes: int,
        capacity_minutes: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.no_capacity = alerting.alarm(
            "NoWorkerCapacity",
            metric=metrics.sonic_metric("inferno_worker_capacity"),
            threshold=1,
            evaluation_periods=3,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing_data=cloudwatch.TreatMissingData.BREACHING,
            description="No GPU worker reports capacity: every request will queue or fail.",
        )
        self.unserviceable = alerting.alarm(
            "UnserviceableRequests",
            metric=metrics.sonic_metric("api_unserviceable_requests_size", statistic="Maximum"),
            threshold=0,
            comparison=ABOVE,
            description="The API server is refusing requests it cannot serve: add workers or raise max_workers.",
        )
        statistic = metrics.worker_ttfa.statistic
        self.ttfa = alerting.alarm(
            "WorkerTtfaP95",
            metric=metrics.worker_ttfa_ms(period=Duration.minutes(5)),
            threshold=ttfa_p95_ms,
            evaluation_periods=2,
            description=f"Worker time to first audio ({statistic}) above {ttfa_p95_ms:g} ms for 10 minutes"
            + ("" if statistic == "p95" else " (the workers publish no percentiles: the mean is alarmed)")
            + ".",
        )
        streams = metrics.streams()
        self.capacity_exhausted = alerting.alarm(
            "WorkerCapacityExhausted",
            metric=cloudwatch.MathExpression(
                expression="load / capacity",
                using_metrics=dict(streams),
                label="worker load / capacity",
                period=Duration.minutes(1),
            ),
            threshold=1,
            evaluation_periods=capacity_minutes,
            comparison=ABOVE,
            description=f"Worker load above worker capacity for {capacity_minutes} minutes: requests queue; "
            "scaling is not keeping up (max_workers, tasks waiting for GPU instances, the G and VT quota).",
        )
        # The GPU hosts' agent is installed at boot (SonicMetrics); if that failed, or the agent stopped,
        # the GPU policy sees nothing. It cannot hold the fleet (it never scales in), but it cannot add
        # capacity either: say so rather than find out at the next peak.
        self.gpu_metrics_missing = alerting.alarm(
            "GpuMetricsMissing",
            metric=metrics.gpu_utilisation(statistic="SampleCount"),
            threshold=1,
            evaluation_periods=GPU_METRICS_GRACE_MINUTES,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing_data=cloudwatch.TreatMissingData.BREACHING,
            description=f"No GPU utilisation from the GPU hosts for {GPU_METRICS_GRACE_MINUTES} minutes: the "
            "CloudWatch agent did not install or stopped (instance console output, "
            "/var/log/amazon/amazon-cloudwatch-agent/); GPU-based scale-out is blind.",
        )
        self.gpu_pinned = alerting.alarm(
            "GpuPinned",
            metric=metrics.gpu_utilisation(),
            threshold=gpu_pinned_percent,
            evaluation_periods=gpu_pinned_minutes,
            comparison=ABOVE,
            description=f"GPU utilisation above {gpu_pinned_percent:g}% for {gpu_pinned_minutes} minutes: scaling "
            "is not keeping up (max_workers, the G and VT instance quota, or capacity in the AZ).",
        )
