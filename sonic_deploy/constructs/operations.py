"""What on-call sees and what pages them, per route: the alarms on what callers feel that need the whole
stack (the canary's, no healthy targets, worker tasks waiting for GPU capacity), the composite alarms, and the
route's dashboard.

This module holds what both routes' operations share: the canary's alarms and the composites that page.
Each route's own (EcsOperations, SageMakerOperations) is in its package's `constructs/operations.py`.

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
from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from sonic_deploy.config import Settings
from sonic_deploy.constructs.agent_telemetry import AgentAlarms, AgentMetrics, agent_row
from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.constructs.canary_alarms import CanaryAlarms, CanaryMetrics
from sonic_deploy.constructs.probe_canary import ProbeCanary


@dataclass(frozen=True)
class Agent:
    """The agent's telemetry on a route: its metrics, its alarms, its dashboard row."""

    metrics: AgentMetrics
    alarms: AgentAlarms
    row: list[cloudwatch.IWidget]


def agent_for(scope: Construct, settings: Settings, alerting: Alerting, route: str) -> Agent | None:
    """The agent's alarms and dashboard row on the route, when `[agent]` is enabled (else None)."""
    agent = settings.environment.agent
    if not agent.enabled:
        return None
    metrics = AgentMetrics(environment=settings.environment_name, route=route)
    alarms = AgentAlarms(scope, "AgentAlarms", alerting=alerting, metrics=metrics, agent=agent)
    return Agent(metrics, alarms, agent_row(metrics, agent))


def canary_alarms_for(
    scope: Construct, settings: Settings, alerting: Alerting, route: str, schedule: ProbeCanary | None
) -> CanaryAlarms | None:
    """The canary's alarms on the route (`schedule`: None when `[canary]` is off), for its composites."""
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


def page_composites(
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
