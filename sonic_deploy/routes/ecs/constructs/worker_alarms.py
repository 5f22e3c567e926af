"""Alarms of the ECS route on the metrics SonicMetrics publishes."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.routes.ecs.constructs.sonic_metrics import SonicMetrics

ABOVE = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
# A new GPU host boots, installs the agent and reports within a few minutes.
GPU_METRICS_GRACE_MINUTES = 15
# The scraper publishes each scraped worker's inferno_worker_capacity every COLLECTION_INTERVAL_S (10 s,
# sonic_metrics.py); five minutes without a sample is no scraper, or no worker task it can find, not a blip.
WORKER_METRICS_GRACE_MINUTES = 5


class WorkerAlarms(Construct):
    """No worker capacity, unserviceable requests, worker TTFA p95, capacity exhausted, GPU pinned, and worker
    and GPU metrics missing. The unserviceable and TTFA alarms double as deployment alarms: they do not depend on the
    services they guard. None has actions of its own: the route's Page composite pages (EcsOperations)."""

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
        # Missing data is not breaching: no samples at all is a dead scraper as often as dead workers, and
        # WorkerMetricsMissing says that (MonitoringBlind). With every worker task gone, the page then names
        # the monitoring, not the callers: the dashboard's scaling row tells the two apart.
        self.no_capacity = alerting.alarm(
            "NoWorkerCapacity",
            metric=metrics.sonic_metric("inferno_worker_capacity"),
            threshold=1,
            evaluation_periods=3,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            description="The GPU workers report no capacity for 3 minutes: every request will queue or fail.",
        )
        self.worker_metrics_missing = alerting.alarm(
            "WorkerMetricsMissing",
            metric=metrics.sonic_metric("inferno_worker_capacity", statistic="SampleCount"),
            threshold=1,
            evaluation_periods=WORKER_METRICS_GRACE_MINUTES,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing_data=cloudwatch.TreatMissingData.BREACHING,
            description=f"No inferno_worker_capacity sample for {WORKER_METRICS_GRACE_MINUTES} minutes: the "
            "metrics scraper stopped or cannot publish (its logs), or no worker task runs for it to scrape (the "
            "scaling row); NoWorkerCapacity and WorkerCapacityExhausted are blind.",
        )
        # A gauge of requests refused now: one minute above 0 is a blip of a burst; two of three a pattern.
        self.unserviceable = alerting.alarm(
            "UnserviceableRequests",
            metric=metrics.sonic_metric("api_unserviceable_requests_size", statistic="Maximum"),
            threshold=0,
            evaluation_periods=3,
            datapoints_to_alarm=2,
            comparison=ABOVE,
            description="The API server refused requests it could not serve in 2 of the last 3 minutes: add "
            "workers or raise max_workers.",
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
        # Full, not over: load is chunks in progress, capacity the chunks the workers can take (domain.md
        # section 2); beyond capacity work waits in api_queue_size, so the ratio is expected to reach 1 and
        # stop there. UNVERIFIED: whether load can ever exceed capacity (not documented by Cartesia).
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
            description=f"Worker load at worker capacity for {capacity_minutes} minutes: requests queue; "
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
