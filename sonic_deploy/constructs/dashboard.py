"""One CloudWatch dashboard per stack, on one screen: three rows of 6 grid units on CloudWatch's 24-column
grid, what callers feel on top, capacity in the middle, scaling at the bottom.

The widgets read the metrics the other constructs expose (SonicMetrics, SonicService, GpuCapacity,
ApiLoadBalancer, SonicEndpoint, CanaryMetrics, CapacityEvents); none spells a metric name of its own. docs/operate.md,
"Dashboard", says what each widget shows and what normal looks like; `python -m sonic_deploy.dashboard_render`
draws one offline from the synthesized body. Each route's rows are its own (`ecs_rows`, `sagemaker_rows`:
`sonic_deploy/routes/<route>/constructs/dashboard.py`); the widgets both draw are here.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from sonic_deploy.constructs.canary_alarms import CanaryMetrics

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
