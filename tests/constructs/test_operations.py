"""EcsOperations and SageMakerOperations: the caller alarms that need the whole stack, the canary's alarms
(only when the canary is on), thresholds from config, and the composites that page once per incident."""

from __future__ import annotations

import re
import shutil
from typing import Any

import pytest
from aws_cdk.assertions import Template

from sonic_deploy.config import Settings, load_settings
from sonic_deploy.dashboard_render import dashboards
from tests.conftest import CONFIG_DIR, resources_of, synthesize_from


@pytest.fixture(scope="module")
def canary_on(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, dict[str, Template]]:
    """dev with the canary on, a 4-minute schedule and thresholds of its own (so none is a default)."""
    config = tmp_path_factory.mktemp("canary-on") / "config"
    shutil.copytree(CONFIG_DIR, config)
    dev = config / "environments/dev.toml"
    text = (
        dev.read_text()
        .replace("# enabled = true", "enabled = true")
        .replace("every_minutes = 5", "every_minutes = 4")
    )
    dev.write_text(
        text.replace("ttfa_p95_ms = 500 ", "ttfa_p95_ms = 450 ").replace(
            "failed_runs = 2 ", "failed_runs = 3 "
        )
    )
    settings = load_settings(config, "dev")
    assert settings.canary_enabled and settings.environment.canary.ttfa_p95_ms == 450
    return settings, {route: Template.from_stack(stack) for route, stack in synthesize_from(config).items()}


def _named(template: Template, type_name: str) -> dict[str, dict[str, Any]]:
    """Construct name (logical ID without "Alerting" and the hash) -> properties."""
    return {
        re.sub(r"[0-9A-F]{8}$", "", key).removeprefix("Alerting"): resource["Properties"]
        for key, resource in resources_of(template, type_name).items()
    }


def _children(composite: dict[str, Any]) -> set[str]:
    """The alarms a composite's rule names, by construct name."""
    rule = composite["AlarmRule"]["Fn::Join"][1]
    return {
        re.sub(r"[0-9A-F]{8}$", "", part["Fn::GetAtt"][0]).removeprefix("Alerting")
        for part in rule
        if isinstance(part, dict)
    }


def test_ecs_composites_group_callers_causes_and_blind_spots(ecs_template: Template) -> None:
    composites = _named(ecs_template, "AWS::CloudWatch::CompositeAlarm")
    assert set(composites) == {"CallersAffected", "CapacityAtRisk", "MonitoringBlind"}
    assert _children(composites["CallersAffected"]) == {
        "NoWorkerCapacity",
        "UnserviceableRequests",
        "WorkerTtfaP95",
        "NoHealthyApiTargets",
    }
    assert _children(composites["CapacityAtRisk"]) == {
        "WorkerCapacityExhausted",
        "WorkerTasksWaiting",
        "GpuPinned",
        "UnhealthyApiTargets",
    }
    assert _children(composites["MonitoringBlind"]) == {"GpuMetricsMissing"}
    # Every child is in exactly one composite: each incident pages once.
    alarms = _named(ecs_template, "AWS::CloudWatch::Alarm")
    grouped = [child for composite in composites.values() for child in _children(composite)]
    assert sorted(grouped) == sorted(alarms)


def test_the_cause_composites_are_suppressed_while_callers_are_affected(ecs_template: Template) -> None:
    composites = resources_of(ecs_template, "AWS::CloudWatch::CompositeAlarm")
    affected = next(key for key in composites if key.startswith("AlertingCallersAffected"))
    assert "ActionsSuppressor" not in composites[affected]["Properties"]
    for key, composite in composites.items():
        if key != affected:
            props = composite["Properties"]
            assert props["ActionsSuppressor"] == {"Fn::GetAtt": [affected, "Arn"]}
            assert (props["ActionsSuppressorWaitPeriod"], props["ActionsSuppressorExtensionPeriod"]) == (
                300,
                600,
            )


def test_ecs_capacity_alarms_take_their_minutes_from_config(
    ecs_template: Template, dev_settings: Settings
) -> None:
    assert dev_settings.environment.ecs is not None
    config = dev_settings.environment.ecs.alarms
    alarms = _named(ecs_template, "AWS::CloudWatch::Alarm")
    exhausted = alarms["WorkerCapacityExhausted"]
    assert (exhausted["Threshold"], exhausted["EvaluationPeriods"]) == (1, config.capacity_minutes)
    assert exhausted["ComparisonOperator"] == "GreaterThanThreshold"
    assert {m.get("Expression") for m in exhausted["Metrics"]} >= {"load / capacity"}
    waiting = alarms["WorkerTasksWaiting"]
    assert (waiting["Threshold"], waiting["EvaluationPeriods"]) == (1, config.provisioning_minutes)
    names = {m["MetricStat"]["Metric"]["MetricName"] for m in waiting["Metrics"] if "MetricStat" in m}
    assert names == {"PendingTaskCount", "DesiredTaskCount", "RunningTaskCount"}
    namespaces = {m["MetricStat"]["Metric"]["Namespace"] for m in waiting["Metrics"] if "MetricStat" in m}
    assert namespaces == {"ECS/ContainerInsights"}


def test_no_healthy_targets(ecs_template: Template) -> None:
    alarm = _named(ecs_template, "AWS::CloudWatch::Alarm")["NoHealthyApiTargets"]
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == (
        "AWS/NetworkELB",
        "HealthyHostCount",
        "Minimum",
    )
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("LessThanThreshold", 1)


def test_nothing_canary_related_when_the_canary_is_off(
    ecs_template: Template, sagemaker_template: Template
) -> None:
    for template in (ecs_template, sagemaker_template):
        assert "SonicDeploy/Canary" not in str(template.to_json()).replace("\\", "")
        assert not any("Canary" in name for name in _named(template, "AWS::CloudWatch::Alarm"))


def test_canary_alarms_when_the_canary_is_on(canary_on: tuple[Settings, dict[str, Template]]) -> None:
    settings, templates = canary_on
    canary = settings.environment.canary
    for route, template in templates.items():
        alarms = _named(template, "AWS::CloudWatch::Alarm")
        ttfa, failures, not_running = (
            alarms["CanaryTtfaP95"],
            alarms["CanaryFailures"],
            alarms["CanaryNotRunning"],
        )
        for alarm in (ttfa, failures, not_running):
            assert alarm["Namespace"] == "SonicDeploy/Canary"
            assert {d["Name"]: d["Value"] for d in alarm["Dimensions"]} == {
                "Environment": "dev",
                "Route": route,
            }
        assert (ttfa["ExtendedStatistic"], ttfa["Threshold"], ttfa["Period"]) == ("p95", 450, 900)
        assert (failures["MetricName"], failures["Threshold"], failures["EvaluationPeriods"]) == (
            "Failed",
            0,
            3,
        )
        assert failures["Period"] == 60 * canary.every_minutes
        assert (not_running["TreatMissingData"], not_running["EvaluationPeriods"]) == ("breaching", 3)
        composites = _named(template, "AWS::CloudWatch::CompositeAlarm")
        assert {"CanaryTtfaP95", "CanaryFailures"} <= _children(composites["CallersAffected"])
        assert "CanaryNotRunning" in _children(composites["MonitoringBlind"])
        # The dashboard graphs the canary in place of the note, its budget the alarm's.
        ((body,),) = [list(dashboards(template.to_json()).values())]
        ttfa = next(w for w in body["widgets"] if w["properties"].get("title", "").startswith("Canary: time"))
        assert ttfa["properties"]["annotations"]["horizontal"][0]["value"] == 450
        assert not any(
            w["type"] == "text" and "Canary" in w["properties"]["markdown"] for w in body["widgets"]
        )
        for y in {w["y"] for w in body["widgets"]}:
            assert sum(w["width"] for w in body["widgets"] if w["y"] == y) == 24


def test_sagemaker_composites(sagemaker_template: Template) -> None:
    composites = _named(sagemaker_template, "AWS::CloudWatch::CompositeAlarm")
    # The canary is off in dev: nothing is blind-spot-only, so no MonitoringBlind.
    assert set(composites) == {"CallersAffected", "CapacityAtRisk"}
    assert _children(composites["CallersAffected"]) == {"Errors5xx", "Errors4xx", "ModelLatencyP95"}
    assert _children(composites["CapacityAtRisk"]) == {"ConcurrencyAboveCapacity", "GpuPinned"}
