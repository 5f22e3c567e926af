"""`[agent] enabled`: the alarms on what the agent's own telemetry says (in CallersAffected) and the
dashboard's agent row, on both routes, reading the names and dimensions the clients write."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Template

from sonic_deploy.client import metric_names as names
from sonic_deploy.client.telemetry import Telemetry
from sonic_deploy.dashboard_render import dashboards
from tests.conftest import resources_of

ROUTES = ["sagemaker", "ecs"]


def _alarm(template: Template, name: str) -> dict[str, Any]:
    (alarm,) = [
        a["Properties"] for i, a in resources_of(template, "AWS::CloudWatch::Alarm").items() if name in i
    ]
    return dict(alarm)


@pytest.mark.parametrize("route", ROUTES)
def test_first_audio_and_errors_page_as_callers_affected(documented: dict[str, Template], route: str) -> None:
    template = documented[route]
    first_audio = _alarm(template, "AgentFirstAudioP95")
    (query,) = first_audio["Metrics"]
    stat = query["MetricStat"]
    assert (stat["Metric"]["Namespace"], stat["Metric"]["MetricName"]) == (names.NAMESPACE, names.FIRST_AUDIO)
    assert (stat["Stat"], stat["Period"], first_audio["Threshold"]) == ("p95", 300, 450)
    assert stat["Metric"]["Dimensions"] == [
        {"Name": names.ENVIRONMENT, "Value": "dev"},
        {"Name": names.ROUTE, "Value": route},
    ]
    assert first_audio["TreatMissingData"] == "notBreaching"
    errors = _alarm(template, "AgentErrors")
    assert errors["Threshold"] == 2
    assert [m["Expression"] for m in errors["Metrics"] if "Expression" in m] == ["100 * errors / requests"]
    composites = resources_of(template, "AWS::CloudWatch::CompositeAlarm")
    (callers,) = [c for i, c in composites.items() if "CallersAffected" in i]
    rule = json.dumps(callers["Properties"]["AlarmRule"])
    assert all(
        alarm_id in rule
        for alarm_id in resources_of(template, "AWS::CloudWatch::Alarm")
        if "Agent" in alarm_id
    )


@pytest.mark.parametrize("route", ROUTES)
def test_the_dashboard_has_the_agent_row(documented: dict[str, Template], route: str) -> None:
    (dashboard,) = resources_of(documented[route], "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert "Agent: first audio its callers got (ms)" in body and "budget p95 450 ms" in body
    ((_, drawn),) = dashboards(documented[route].to_json()).items()
    hops = next(w for w in drawn["widgets"] if "turn hops" in w["properties"].get("title", ""))
    assert [line[1] for line in hops["properties"]["metrics"]] == list(names.HOPS)
    assert {line[-1]["stat"] for line in hops["properties"]["metrics"]} == {"p50"}
    assert f'Route=\\\\\\"{route}\\\\\\"' in body or f'Route=\\"{route}\\"' in body  # the search, per route


def test_off_by_default(ecs_template: Template, sagemaker_template: Template) -> None:
    for template in (ecs_template, sagemaker_template):
        assert not [i for i in resources_of(template, "AWS::CloudWatch::Alarm") if "Agent" in i]


def test_the_alarms_read_what_a_client_writes() -> None:
    lines: list[str] = []
    Telemetry("ecs", environment="dev", endpoint="e", write=lines.append).emit(
        {names.FIRST_AUDIO: 90.0}, None
    )
    line = json.loads(lines[0])
    (directive,) = line["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == names.NAMESPACE
    assert directive["Dimensions"] == [[names.ENVIRONMENT, names.ROUTE]]
    assert (line[names.ENVIRONMENT], line[names.ROUTE], line[names.FIRST_AUDIO]) == ("dev", "ecs", 90.0)
