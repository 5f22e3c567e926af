"""What the agent's own telemetry says (sonic_deploy/client/telemetry.py): its metrics as CloudWatch metric
objects, the alarms on them, and the dashboard row, for either route (`[agent]` in the environment)."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from sonic_deploy.client import metric_names as names
from sonic_deploy.config.schema import AgentConfig
from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.constructs.dashboard import graph

PERIOD = Duration.minutes(1)
ALARM_PERIOD = Duration.minutes(5)


class AgentMetrics:
    """The agent's metrics of one environment and route (dimensions Environment and Route)."""

    def __init__(self, *, environment: str, route: str) -> None:
        self.environment, self.route = environment, route

    def metric(self, name: str, *, statistic: str = "Sum", period: Duration = PERIOD) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=names.NAMESPACE,
            metric_name=name,
            statistic=statistic,
            period=period,
            dimensions_map={names.ENVIRONMENT: self.environment, names.ROUTE: self.route},
        )

    def first_audio(self, statistic: str, period: Duration = PERIOD) -> cloudwatch.Metric:
        return self.metric(names.FIRST_AUDIO, statistic=statistic, period=period).with_(
            label=f"agent first audio {statistic}"
        )

    def error_percent(self, period: Duration = PERIOD) -> cloudwatch.MathExpression:
        """Failed utterances per 100; no data point where there was no request (not 0 of 0)."""
        return cloudwatch.MathExpression(
            expression="100 * errors / requests",
            using_metrics={
                "errors": self.metric(names.ERRORS, period=period),
                "requests": self.metric(names.REQUESTS, period=period),
            },
            label="agent errors (%)",
            period=period,
        )

    def errors_by_kind(self) -> cloudwatch.MathExpression:
        """One line per error kind the agent reported (a search: the kinds are not known at synth)."""
        query = (
            f"{{{names.NAMESPACE},{names.ENVIRONMENT},{names.ERROR_KIND},{names.ROUTE}}} "
            f'MetricName="{names.ERRORS}" {names.ENVIRONMENT}="{self.environment}" {names.ROUTE}="{self.route}"'
        )
        return cloudwatch.MathExpression(
            expression=f"SEARCH('{query}', 'Sum', 60)", using_metrics={}, label="", period=PERIOD
        )


class AgentAlarms(Construct):
    """The agent's first-audio p95 above budget, and its share of failed utterances: what its callers got,
    for CallersAffected. No data (no call, or telemetry off in the agent) is not breaching."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        alerting: Alerting,
        metrics: AgentMetrics,
        agent: AgentConfig,
    ) -> None:
        super().__init__(scope, construct_id)
        budget = agent.first_audio_p95_ms
        self.first_audio = alerting.alarm(
            "AgentFirstAudioP95",
            metric=metrics.first_audio("p95", ALARM_PERIOD),
            threshold=budget,
            evaluation_periods=3,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            description=f"The agent's callers waited more than {budget:g} ms for first audio (p95) for 15 minutes "
            "(its own telemetry). The endpoint's latency and the canary say whether Sonic or the path is slow.",
        )
        self.errors = alerting.alarm(
            "AgentErrors",
            metric=metrics.error_percent(ALARM_PERIOD),
            threshold=agent.error_percent,
            evaluation_periods=2,
            comparison=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            description=f"More than {agent.error_percent:g}% of the agent's utterances failed in two 5-minute "
            "periods in a row; the dashboard's agent row says of which kind (429: capacity).",
        )
        self.caller_facing: list[cloudwatch.IAlarm] = [self.first_audio, self.errors]


def agent_row(metrics: AgentMetrics, agent: AgentConfig) -> list[cloudwatch.IWidget]:
    """First audio (p50, p95, p99 and the budget), errors by kind, requests and underruns, and the turn's
    hops as the agent's framework measured them (p50): 4 x 6 units."""
    budget = agent.first_audio_p95_ms
    return [
        graph(
            "Agent: first audio its callers got (ms)",
            [metrics.first_audio(statistic) for statistic in ("p50", "p95", "p99")],
            width=6,
            left_label="ms",
            budget=(budget, f"budget p95 {budget:g} ms"),
        ),
        graph("Agent: errors by kind", [metrics.errors_by_kind()], right=[metrics.error_percent()], width=6),
        graph(
            "Agent: utterances and underruns",
            [metrics.metric(names.REQUESTS).with_(label="utterances")],
            right=[metrics.metric(names.UNDERRUNS).with_(label="underruns")],
            width=6,
        ),
        graph(
            "Agent: turn hops, the framework's own (ms p50)",
            [metrics.metric(hop, statistic="p50").with_(label=HOP_LABELS[hop]) for hop in names.HOPS],
            width=6,
            left_label="ms",
        ),
    ]


HOP_LABELS = {
    names.STT_FINAL: "speech end to final transcript",
    names.LLM_FIRST_TOKEN: "LLM first token",
    names.TTS_FIRST_BYTE: "TTS first audio",
}
