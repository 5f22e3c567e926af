"""EcsOperations and SageMakerOperations: the caller alarms that need the whole stack, the canary's alarms
(only when the canary is on), thresholds from config, and the composites that page once per incident."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from typing import Any

import pytest
from aws_cdk.assertions import Template

from sonic_deploy.config import Settings, load_settings
from sonic_deploy.dashboard_render import dashboards
from tests.conftest import CONFIG_DIR, EditConfig, resources_of, synthesize_from

GROUPS = {"CallersAffected", "CapacityAtRisk", "MonitoringBlind"}


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


def _membership(template: Template) -> Counter[str]:
    """How many group composites each single alarm is in."""
    composites = _named(template, "AWS::CloudWatch::CompositeAlarm")
    counts: Counter[str] = Counter({name: 0 for name in _named(template, "AWS::CloudWatch::Alarm")})
    counts.update(child for name in GROUPS & set(composites) for child in _children(composites[name]))
    return counts


def test_ecs_composites_group_callers_causes_and_blind_spots(ecs_template: Template) -> None:
    composites = _named(ecs_template, "AWS::CloudWatch::CompositeAlarm")
    assert set(composites) == GROUPS | {"Page"}
    assert _children(composites["Page"]) == GROUPS
    assert _children(composites["CallersAffected"]) == {
        "NoWorkerCapacity",
        "UnserviceableRequests",
        "WorkerTtfaP95",
        "NoHealthyApiTargets",
    }
    assert _children(composites["CapacityAtRisk"]) == {
        "WorkerCapacityExhausted",
        "WorkerTasksWaiting",
        "GpuLaunchesFailing",
        "GpuPinned",
        "UnhealthyApiTargets",
    }
    assert _children(composites["MonitoringBlind"]) == {"WorkerMetricsMissing", "GpuMetricsMissing"}
    # Every child is in exactly one group, and the groups in Page: whatever fires pages, through Page only.
    assert set(_membership(ecs_template).values()) == {1}


def test_air_gapped_pages_when_the_licence_loader_gives_up(air_gapped: Template) -> None:
    """A licence proxy ECS replaced reloads with nobody watching: the loader's give-up line pages, in
    CapacityAtRisk (the proxy runs on the licence it kept until that expires)."""
    composites = _named(air_gapped, "AWS::CloudWatch::CompositeAlarm")
    assert "LicenceNotLoaded" in _children(composites["CapacityAtRisk"])
    assert set(_membership(air_gapped).values()) == {1}
    alarm = _named(air_gapped, "AWS::CloudWatch::Alarm")["LicenceNotLoaded"]
    assert (alarm["MetricName"], alarm["Namespace"], alarm["Statistic"]) == (
        "LicenceLoadFailures",
        "Sonic/ECS",
        "Sum",
    )
    assert (alarm["Threshold"], alarm["ComparisonOperator"], alarm["TreatMissingData"]) == (
        1,
        "GreaterThanOrEqualToThreshold",
        "notBreaching",
    )
    (log_filter,) = resources_of(air_gapped, "AWS::Logs::MetricFilter").values()
    props = log_filter["Properties"]
    assert props["FilterPattern"] == '"the licence proxy did not accept the licence"'
    assert props["LogGroupName"]["Ref"].startswith("SonicLicenceProxyLogs")
    (transformation,) = props["MetricTransformations"]
    assert (transformation["MetricName"], transformation["MetricValue"]) == ("LicenceLoadFailures", "1")


def test_only_page_notifies_and_nothing_is_suppressed(
    ecs_template: Template, sagemaker_template: Template
) -> None:
    for template in (ecs_template, sagemaker_template):
        composites = _named(template, "AWS::CloudWatch::CompositeAlarm")
        for name, props in composites.items():
            assert not {"ActionsSuppressor", "ActionsSuppressorWaitPeriod"} & set(props)
            if name == "Page":
                assert props["AlarmActions"] == props["OKActions"]
                assert props["AlarmActions"][0]["Ref"].startswith("AlertingTopic")
            else:
                assert not {"AlarmActions", "OKActions", "InsufficientDataActions"} & set(props), name


def test_ecs_alarm_thresholds_follow_config(edit_config: EditConfig) -> None:
    """Values that are no default, so the test cannot pass on the code's own constants."""
    config = edit_config(
        "environments/dev.toml",
        "target_utilisation = 0.8           # SUM",
        "target_utilisation = 0.65          # SUM",
    )
    edit_config(
        "environments/dev.toml", "", "\n[ecs.alarms]\ncapacity_minutes = 7\nprovisioning_minutes = 13\n"
    )
    settings = load_settings(config, "dev")
    assert settings.environment.ecs is not None
    cfg = settings.environment.ecs
    assert (cfg.alarms.capacity_minutes, cfg.alarms.provisioning_minutes, cfg.target_utilisation) == (
        7,
        13,
        0.65,
    )
    template = Template.from_stack(synthesize_from(config, routes=["ecs"])["ecs"])
    alarms = _named(template, "AWS::CloudWatch::Alarm")
    exhausted = alarms["WorkerCapacityExhausted"]
    # Full is load == capacity: the ratio is not expected to pass 1 (worker_alarms.py, UNVERIFIED).
    assert (exhausted["Threshold"], exhausted["EvaluationPeriods"]) == (1, cfg.alarms.capacity_minutes)
    assert exhausted["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert {m.get("Expression") for m in exhausted["Metrics"]} >= {"load / capacity"}
    assert f"for {cfg.alarms.capacity_minutes} minutes" in exhausted["AlarmDescription"]
    waiting = alarms["WorkerTasksWaiting"]
    assert (waiting["Threshold"], waiting["EvaluationPeriods"]) == (1, cfg.alarms.provisioning_minutes)
    assert f"for {cfg.alarms.provisioning_minutes} minutes" in waiting["AlarmDescription"]
    assert "crash-looping" in waiting["AlarmDescription"]
    names = {m["MetricStat"]["Metric"]["MetricName"] for m in waiting["Metrics"] if "MetricStat" in m}
    assert names == {"PendingTaskCount", "DesiredTaskCount", "RunningTaskCount"}
    namespaces = {m["MetricStat"]["Metric"]["Namespace"] for m in waiting["Metrics"] if "MetricStat" in m}
    assert namespaces == {"ECS/ContainerInsights"}
    # The streams widget: the ratio, with lines at the scaling target and at full.
    ((body,),) = [list(dashboards(template.to_json()).values())]
    (streams,) = [w for w in body["widgets"] if w["properties"].get("title", "").startswith("Active streams")]
    assert [m[0].get("expression") for m in streams["properties"]["metrics"] if isinstance(m[0], dict)] == [
        "load / capacity"
    ]
    lines = {a["value"] for a in streams["properties"]["annotations"]["horizontal"]}
    assert lines == {cfg.target_utilisation, 1}


def test_worker_alarms_on_missing_data(ecs_template: Template) -> None:
    alarms = _named(ecs_template, "AWS::CloudWatch::Alarm")
    # A dead scraper is monitoring gone blind, not callers affected.
    assert alarms["NoWorkerCapacity"]["TreatMissingData"] == "notBreaching"
    missing = alarms["WorkerMetricsMissing"]
    assert (missing["MetricName"], missing["Statistic"], missing["TreatMissingData"]) == (
        "inferno_worker_capacity",
        "SampleCount",
        "breaching",
    )
    assert (missing["ComparisonOperator"], missing["Threshold"]) == ("LessThanThreshold", 1)
    unserviceable = alarms["UnserviceableRequests"]
    assert (unserviceable["DatapointsToAlarm"], unserviceable["EvaluationPeriods"]) == (2, 3)


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
        resources = template.to_json()["Resources"]
        # The probe task's role may publish the canary's metrics (any `--publish-metrics` run, the canary's
        # or an operator's in-VPC run); nothing else reads or schedules them.
        readers = {
            name: resource
            for name, resource in resources.items()
            if "SonicDeploy/Canary" in json.dumps(resource).replace("\\", "")
        }
        assert {resource["Type"] for resource in readers.values()} == {"AWS::IAM::Policy"}, sorted(readers)
        assert not any("Canary" in name for name in _named(template, "AWS::CloudWatch::Alarm"))
        assert not template.find_resources("AWS::Scheduler::Schedule")


def test_canary_alarms_when_the_canary_is_on(canary_on: tuple[Settings, dict[str, Template]]) -> None:
    settings, templates = canary_on
    canary = settings.environment.canary
    every = 60 * canary.every_minutes
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
        # A 15-minute p95 in 2 of 3 windows: one slow request fills one window only.
        assert (ttfa["ExtendedStatistic"], ttfa["Threshold"], ttfa["Period"]) == (
            "p95",
            canary.ttfa_p95_ms,
            900,
        )
        assert (ttfa["EvaluationPeriods"], ttfa["DatapointsToAlarm"]) == (3, 2)
        assert f"above {canary.ttfa_p95_ms:g} ms over 15 minutes" in ttfa["AlarmDescription"]
        assert (failures["MetricName"], failures["Threshold"], failures["EvaluationPeriods"]) == (
            "Failed",
            0,
            canary.failed_runs,
        )
        assert (failures["Period"], failures["TreatMissingData"]) == (every, "ignore")
        assert f"in {canary.failed_runs} runs in a row" in failures["AlarmDescription"]
        # Two runs a period, so that a run landing late leaves no period empty; enough periods for the runs.
        assert (not_running["TreatMissingData"], not_running["Period"]) == ("breaching", 2 * every)
        assert not_running["EvaluationPeriods"] * 2 >= canary.failed_runs
        assert (not_running["EvaluationPeriods"] - 1) * 2 < canary.failed_runs
        composites = _named(template, "AWS::CloudWatch::CompositeAlarm")
        assert {"CanaryTtfaP95", "CanaryFailures"} <= _children(composites["CallersAffected"])
        assert "CanaryNotRunning" in _children(composites["MonitoringBlind"])
        # Scheduler's own count of runs it could not start, in the canary's schedule group, as many in a row.
        not_starting = alarms["CanaryNotStarting"]
        (group,) = template.find_resources("AWS::Scheduler::ScheduleGroup")
        metrics = {m["Id"]: m for m in not_starting["Metrics"]}
        expression = metrics.pop(next(i for i, m in metrics.items() if "Expression" in m))["Expression"]
        assert expression == "FILL(errors, 0) + FILL(dropped, 0)"
        assert {m["MetricStat"]["Metric"]["MetricName"] for m in metrics.values()} == {
            "TargetErrorCount",
            "InvocationDroppedCount",
        }
        for m in metrics.values():
            stat = m["MetricStat"]
            assert stat["Metric"]["Namespace"] == "AWS/Scheduler"
            assert stat["Metric"]["Dimensions"] == [{"Name": "ScheduleGroup", "Value": {"Ref": group}}]
            assert (stat["Stat"], stat["Period"]) == ("Sum", every)
        assert (not_starting["Threshold"], not_starting["EvaluationPeriods"]) == (1, canary.failed_runs)
        assert "CanaryNotStarting" in _children(composites["MonitoringBlind"])
        assert _children(composites["Page"]) == GROUPS
        membership = _membership(template)
        if route == "sagemaker":
            # Errors4xx mixes clients' 422s with 429s: shown on the dashboard, in no composite.
            assert membership.pop("Errors4xx") == 0
        assert set(membership.values()) == {1}, membership
        # The dashboard graphs the canary in place of the note, its budget the alarm's.
        ((body,),) = [list(dashboards(template.to_json()).values())]
        ttfa = next(w for w in body["widgets"] if w["properties"].get("title", "").startswith("Canary: time"))
        assert ttfa["properties"]["annotations"]["horizontal"][0]["value"] == canary.ttfa_p95_ms
        assert not any(
            w["type"] == "text" and "Canary" in w["properties"]["markdown"] for w in body["widgets"]
        )
        for y in {w["y"] for w in body["widgets"]}:
            assert sum(w["width"] for w in body["widgets"] if w["y"] == y) == 24


def test_sagemaker_composites(sagemaker_template: Template) -> None:
    composites = _named(sagemaker_template, "AWS::CloudWatch::CompositeAlarm")
    # The canary is off in dev: nothing is blind-spot-only, so no MonitoringBlind.
    assert set(composites) == {"Page", "CallersAffected", "CapacityAtRisk"}
    assert _children(composites["Page"]) == {"CallersAffected", "CapacityAtRisk"}
    assert _children(composites["CallersAffected"]) == {"Errors5xx", "ModelLatencyP95"}
    assert _children(composites["CapacityAtRisk"]) == {"ConcurrencyAboveCapacity", "GpuPinned"}
    # Errors4xx (422s and 429s mixed) pages nowhere; it is on the dashboard's alarm widget.
    membership = _membership(sagemaker_template)
    assert membership.pop("Errors4xx") == 0
    assert set(membership.values()) == {1}
    ((body,),) = [list(dashboards(sagemaker_template.to_json()).values())]
    (widget,) = [w for w in body["widgets"] if w["type"] == "alarm"]
    assert any("Errors4xx" in str(arn) for arn in widget["properties"]["alarms"])
