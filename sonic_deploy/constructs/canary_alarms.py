"""The canary's metrics as CloudWatch metric objects (what the scheduled probe publishes with
`--publish-metrics`: sonic_deploy/probe/canary_metrics.py), and the alarms on them."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from sonic_deploy.config.rules import CANARY_TTFA_WINDOW_MINUTES
from sonic_deploy.config.schema import CanaryConfig
from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.probe import canary_metrics

# The first-audio alarm's p95 is over a window of CANARY_TTFA_WINDOW_MINUTES (canary.ttfa_p95_ms: "over 15
# minutes"), and it fires on TTFA_DATAPOINTS of TTFA_PERIODS windows. At the default of 3 requests every 5 minutes a
# window holds 9 values, so its p95 is close to their maximum: one slow request fills one window, not two.
# A config rule keeps canary.every_minutes at most 15 / 3 (config/rules.py, CANARY_TTFA_WINDOW_RUNS), so that
# every window holds at least three runs.
TTFA_WINDOW = Duration.minutes(CANARY_TTFA_WINDOW_MINUTES)
TTFA_PERIODS, TTFA_DATAPOINTS = 3, 2


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
        failed_starts: cloudwatch.IMetric | None = None,
    ) -> None:
        """`failed_starts`: the schedule's runs that did not start, per run (ProbeCanary.failed_starts)."""
        super().__init__(scope, construct_id)
        self.metrics = metrics
        budget, runs = canary.ttfa_p95_ms, canary.failed_runs
        window = CANARY_TTFA_WINDOW_MINUTES
        self.ttfa = alerting.alarm(
            "CanaryTtfaP95",
            metric=metrics.metric(canary_metrics.TTFA, statistic="p95", period=TTFA_WINDOW),
            threshold=budget,
            evaluation_periods=TTFA_PERIODS,
            datapoints_to_alarm=TTFA_DATAPOINTS,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            description=f"Canary time to first audio p95 above {budget:g} ms over {window} minutes, in "
            f"{TTFA_DATAPOINTS} of the last {TTFA_PERIODS} {window}-minute windows, measured through the callers' "
            "path: callers hear the agent late.",
        )
        # One period per run: Failed is a count per run (0 when all succeeded), throttled requests among the
        # failed ones (publish_metrics.metric_data: Throttled counts the failed requests refused for want of
        # capacity), so this is also the canary's alarm on 429s: no alarm of Throttled's own. A run that lands
        # in the next period leaves one period empty: missing data is ignored ("ignore: the current alarm state
        # is maintained", CloudWatch User Guide, "Configuring how CloudWatch alarms treat missing data"), so an
        # empty period does not count as a good run; CanaryNotRunning sees no runs. UNVERIFIED: how CloudWatch
        # fills an evaluation range with some periods empty under ignore (the page's worked table was not
        # found here): the alarm may need one period more than `runs` to fire after a late run.
        self.failures = alerting.alarm(
            "CanaryFailures",
            metric=metrics.metric(canary_metrics.FAILED),
            threshold=0,
            evaluation_periods=runs,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            missing_data=cloudwatch.TreatMissingData.IGNORE,
            description=f"Canary requests failed in {runs} runs in a row (throttled ones, 429 or 1013, "
            "included): callers' requests are failing or refused.",
        )
        # Requests is published by every run that got as far as publishing; none for a while is a stopped
        # schedule, a task that cannot start, or a publish that fails. Missing data is the signal. Periods of
        # two runs each, so that a run landing in the next period (the schedule's and the task's start time
        # vary) leaves no period empty; not_running_periods(runs) of them cover at least `runs` runs.
        periods = not_running_periods(runs)
        quiet = periods * 2 * canary.every_minutes
        self.not_running = alerting.alarm(
            "CanaryNotRunning",
            metric=metrics.metric(
                canary_metrics.REQUESTS,
                statistic="SampleCount",
                period=Duration.minutes(2 * canary.every_minutes),
            ),
            threshold=1,
            evaluation_periods=periods,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing_data=cloudwatch.TreatMissingData.BREACHING,
            description=f"No canary run published for {quiet} minutes ({runs} or more runs missed): the schedule, "
            "the probe task or its PutMetricData is broken (the task's logs), and the canary alarms are blind.",
        )
        self.caller_facing: list[cloudwatch.IAlarm] = [self.ttfa, self.failures]
        # Why no run publishes, when Scheduler knows: its RunTask call failed (a denied role, a request ECS does
        # not take, throttling) or the invocation was dropped. A task that starts and then stops (no Fargate
        # capacity, an image it cannot pull: RunTask answers those with a task, or with `failures` in a
        # successful response) is not counted here; CanaryNotRunning sees it. As many runs in a row as
        # CanaryFailures wants.
        self.blind: list[cloudwatch.IAlarm] = [self.not_running]
        if failed_starts is not None:
            self.not_starting = alerting.alarm(
                "CanaryNotStarting",
                metric=failed_starts,
                threshold=1,
                evaluation_periods=runs,
                description=f"The canary schedule's RunTask call failed in {runs} runs in a row (AWS/Scheduler "
                "TargetErrorCount or InvocationDroppedCount): the schedule's role or its RunTask request. A task that "
                "starts and stops is CanaryNotRunning.",
            )
            self.blind.append(self.not_starting)


def not_running_periods(runs: int) -> int:
    """Periods of two runs each that cover `runs` runs: ceil(runs / 2)."""
    return -(-runs // 2)
