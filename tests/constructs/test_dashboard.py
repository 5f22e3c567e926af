"""OperationsDashboard: one per stack, rows that fill the 24-column grid, the widgets the issue asks for
from the constructs' metrics, the canary note when it is off; the bodies as syrupy snapshots."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk.assertions import Template
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from sonic_deploy.constructs.dashboard import FULL_WIDTH, OperationsDashboard
from sonic_deploy.dashboard_render import dashboards
from tests.conftest import resources_of


def body(template: Template) -> dict[str, Any]:
    ((found,),) = [list(dashboards(template.to_json()).values())]
    return found


def _titles(dashboard: dict[str, Any]) -> list[str]:
    return [w["properties"].get("title", "") for w in dashboard["widgets"]]


def _metric_names(dashboard: dict[str, Any]) -> set[str]:
    return {
        entry[1]
        for w in dashboard["widgets"]
        if w["type"] == "metric"
        for entry in w["properties"]["metrics"]
        if len(entry) > 1 and isinstance(entry[1], str)
    }


@pytest.mark.parametrize("route", ["ecs", "sagemaker"])
def test_dashboard_body_snapshot(
    route: str, ecs_template: Template, sagemaker_template: Template, snapshot: SnapshotAssertion
) -> None:
    template = ecs_template if route == "ecs" else sagemaker_template
    assert body(template) == snapshot(extension_class=JSONSnapshotExtension)


def test_one_dashboard_per_stack_on_one_screen(ecs_template: Template, sagemaker_template: Template) -> None:
    for template in (ecs_template, sagemaker_template):
        assert len(resources_of(template, "AWS::CloudWatch::Dashboard")) == 1
        widgets = body(template)["widgets"]
        assert max(w["y"] + w["height"] for w in widgets) <= 18  # three rows of 6
        for y in {w["y"] for w in widgets}:
            assert sum(w["width"] for w in widgets if w["y"] == y) == FULL_WIDTH


def test_ecs_widgets(ecs_template: Template) -> None:
    dashboard = body(ecs_template)
    names = _metric_names(dashboard)
    assert {
        "inferno_worker_ttfa",
        "inferno_worker_load",
        "inferno_worker_capacity",
        "nvidia_smi_utilization_gpu",
        "nvidia_smi_memory_used",
        "api_unserviceable_requests_size",
        "HealthyHostCount",
        "DesiredTaskCount",
        "RunningTaskCount",
        "PendingTaskCount",
        "GroupDesiredCapacity",
        "GroupInServiceInstances",
        "MatchedEvents",
        "FailedInvocations",
    } <= names
    assert any(w["type"] == "alarm" for w in dashboard["widgets"])


def test_the_scaling_row_says_why_gpu_capacity_is_short(ecs_template: Template) -> None:
    """The failed launches and placements (each rule's MatchedEvents), and the capacity log's newest reasons:
    the ASG's StatusMessage, ECS's reason."""
    dashboard = body(ecs_template)
    rules = sorted(k for k in resources_of(ecs_template, "AWS::Events::Rule") if k.startswith("Operations"))
    (failures,) = [
        w for w in dashboard["widgets"] if w["properties"].get("title", "").startswith("Failed launches")
    ]
    matched = sorted(
        m[3] for m in failures["properties"]["metrics"] if m[:2] == ["AWS/Events", "MatchedEvents"]
    )
    assert matched == [f"<{rule}>" for rule in rules]
    (log,) = [w for w in dashboard["widgets"] if w["type"] == "log"]
    (group,) = [
        k for k in resources_of(ecs_template, "AWS::Logs::LogGroup") if k.startswith("OperationsCapacity")
    ]
    assert log["properties"]["title"] == "Why GPU capacity is short"
    assert log["properties"]["view"] == "table"
    assert log["properties"]["query"] == (
        f"SOURCE '<{group}>' | fields @timestamp, detail.StatusMessage, detail.reason\n"
        "| sort @timestamp desc\n| limit 20"
    )
    # Both in the scaling row, the bottom one.
    assert failures["y"] == log["y"] == max(w["y"] for w in dashboard["widgets"])


def test_the_gpu_group_collects_the_metrics_the_dashboard_graphs(ecs_template: Template) -> None:
    (group,) = resources_of(ecs_template, "AWS::AutoScaling::AutoScalingGroup").values()
    (collection,) = group["Properties"]["MetricsCollection"]
    assert collection["Granularity"] == "1Minute"
    assert {"GroupDesiredCapacity", "GroupInServiceInstances"} <= set(collection["Metrics"])


def test_sagemaker_widgets(sagemaker_template: Template) -> None:
    dashboard = body(sagemaker_template)
    assert {
        "ModelLatency",
        "OverheadLatency",
        "ConcurrentRequestsPerModel",
        "GPUUtilization",
        "GPUMemoryUtilization",
        "Invocation4XXErrors",
        "Invocation5XXErrors",
    } <= _metric_names(dashboard)
    text = " ".join(w["properties"]["markdown"] for w in dashboard["widgets"] if w["type"] == "text")
    assert "publishes no instance count" in text
    expressions = [
        entry[0]["expression"]
        for w in dashboard["widgets"]
        if w["type"] == "metric"
        for entry in w["properties"]["metrics"]
        if isinstance(entry[0], dict) and "expression" in entry[0]
    ]
    assert "modellatency_p95 / 1000" in expressions  # microseconds to ms


def test_canary_off_is_a_note_that_says_how_to_turn_it_on(
    ecs_template: Template, sagemaker_template: Template
) -> None:
    for template in (ecs_template, sagemaker_template):
        dashboard = body(template)
        assert "SonicDeploy/Canary" not in json.dumps(dashboard)
        (note,) = [
            w for w in dashboard["widgets"] if w["type"] == "text" and "Canary" in w["properties"]["markdown"]
        ]
        assert "enabled = true" in note["properties"]["markdown"]
        assert (note["x"], note["y"], note["width"]) == (0, 0, 12)


def test_a_row_that_does_not_fill_the_grid_is_refused() -> None:
    with pytest.raises(ValueError, match="a row is 12 columns wide, not 24"):
        OperationsDashboard(
            Stack(),
            "Dashboard",
            dashboard_name="x",
            rows=[[cloudwatch.TextWidget(markdown="x", width=12, height=6)]],
        )
