"""The canary's metrics as CloudWatch metric objects (what the scheduled probe publishes with
`--publish-metrics`: sonic_deploy/probe/canary_metrics.py), and the alarms on them."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from sonic_deploy.config.schema import CanaryConfig
from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.probe import canary_metrics

# The window of the first-audio alarm (canary.ttfa_p95_ms: "over 15 minutes"): at the default of 3 requests
# every 5 minutes, 9 values, so its p95 is close to their maximum. One slow request in 15 minutes fires it.
TTFA_WINDOW = Duration.minutes(15)


class CanaryMetrics:
    """The canary's metrics of one environment and route (dimensions Environment and Route)."""

    def __init__(self, *, environment: str, route: str, every: Duration) -> None:
        self.environment, self.route, self.every = environment, route, every

    def metric(
        self, name: str, *, statistic: str = "Sum", period: Duration | None = None
    ) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=canary_metrics.NAMESPACE,
            metric_name=name,
            statistic=statistic,
            period=period or self.every,
            dimensions_map={
                canary_metrics.ENVIRONMENT_DIMENSION: self.environment,
                canary_metrics.ROUTE_DIMENSION: self.route,
            },
        )

    def ttfa_ms(self, statistic: str, *, period: Duration | None = None) -> cloudwatch.Metric:
        """First audio in ms over each period, one raw value per successful measured request."""
        return self.metric(canary_metrics.TTFA, statistic=statistic, period=period).with_(
            label=f"canary TTFA {statistic}"
        )

    def runs(self) -> dict[str, cloudwatch.Metric]:
        """Requests that succeeded, failed, and of those were refused for want of capacity, per run."""
        return {
            name: self.metric(name).with_(label=f"canary {name.lower()}")
            for name in (canary_metrics.SUCCEEDED, canary_metrics.FAILED, canary_metrics.THROTTLED)
        }


class CanaryAlarms(Construct):
    """What a caller would have felt a minute ago: first audio above budget, and failed requests in
    `failed_runs` runs in a row. A third alarm says the canary itself stopped (no run at all), which is not a
    caller symptom but leaves the first two blind."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        alerting: Alerting,
        metrics: CanaryMetrics,
        canary: CanaryConfig,
    ) -> None:
        super().__init__(scope, construct_id)
        self.metrics = metrics
        budget, runs = canary.ttfa_p95_ms, canary.failed_runs
        self.ttfa = alerting.alarm(
            "CanaryTtfaP95",
            metric=metrics.metric(canary_metrics.TTFA, statistic="p95", period=TTFA_WINDOW),
            threshold=budget,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            description=f"Canary time to first audio p95 above {budget:g} ms over 15 minutes, measured through the "
            "callers' path: callers hear the agent late.",
        )
        # One period per run: Failed is a count per run (0 when all succeeded).
        self.failures = alerting.alarm(
            "CanaryFailures",
            metric=metrics.metric(canary_metrics.FAILED),
            threshold=0,
            evaluation_periods=runs,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            description=f"Canary requests failed in {runs} runs in a row (throttled ones included): callers' "
            "requests are failing.",
        )
        # Requests is published by every run that got as far as publishing; none for `runs` periods is a
        # stopped schedule, a task that cannot start, or a publish that fails. Missing data is the signal.
        self.not_running = alerting.alarm(
            "CanaryNotRunning",
            metric=metrics.metric(canary_metrics.REQUESTS, statistic="SampleCount"),
            threshold=1,
            evaluation_periods=runs,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing_data=cloudwatch.TreatMissingData.BREACHING,
            description=f"No canary run published for {runs} runs: the schedule, the probe task or its "
            "PutMetricData is broken (the task's logs), and the canary alarms are blind.",
        )
        self.caller_facing: list[cloudwatch.IAlarm] = [self.ttfa, self.failures]
