"""The EKS route's operations, read off the session's dev-eks template: its alarms, the composites that page,
the dashboard, and the canary's metrics under the route's own name."""

from __future__ import annotations

import json

from aws_cdk.assertions import Template

from sonic_deploy.routes.eks.constructs.operations import METRICS_NAMESPACE
from sonic_deploy.routes.eks.manifests_metrics import GPU_UTIL
from tests.conftest import resources_of

ALARMS = (
    "NoWorkerCapacity",
    "WorkerMetricsMissing",
    "UnserviceableRequests",
    "WorkerTtfaP95",
    "WorkerCapacityExhausted",
    "PodsWaiting",
    "GpuMetricsMissing",
    "NoHealthyApiTargets",
    "UnhealthyApiTargets",
)


def _by_id(template: Template, type_name: str) -> dict[str, dict[str, object]]:
    return resources_of(template, type_name)


def test_every_alarm_is_there_without_actions_and_page_alone_notifies(eks_template: Template) -> None:
    alarms = _by_id(eks_template, "AWS::CloudWatch::Alarm")
    for name in ALARMS:
        (found,) = [a for logical, a in alarms.items() if logical.startswith(f"Alerting{name}")]
        assert "AlarmActions" not in found["Properties"]  # type: ignore[operator]
    composites = _by_id(eks_template, "AWS::CloudWatch::CompositeAlarm")
    notifying = [c for c in composites.values() if c["Properties"].get("AlarmActions")]  # type: ignore[attr-defined]
    assert len(notifying) == 1


def test_the_worker_alarms_read_the_routes_namespace_by_cluster(eks_template: Template) -> None:
    alarms = json.dumps(_by_id(eks_template, "AWS::CloudWatch::Alarm"))
    assert METRICS_NAMESPACE in alarms and GPU_UTIL in alarms
    assert '"Name": "ClusterName", "Value": "sonic-dev-eks"' in alarms  # a plain name, no token


def test_the_canary_publishes_under_the_eks_route(eks_template: Template) -> None:
    (schedule,) = _by_id(eks_template, "AWS::Scheduler::Schedule").values()
    command = json.dumps(schedule["Properties"]).replace("\\", "")
    assert '"--publish-route","eks"' in command.replace(" ", "")
    canary = json.dumps(_by_id(eks_template, "AWS::CloudWatch::Alarm"))
    assert '"Name": "Route", "Value": "eks"' in canary


def test_one_dashboard_for_the_route(eks_template: Template) -> None:
    (dashboard,) = _by_id(eks_template, "AWS::CloudWatch::Dashboard").values()
    assert dashboard["Properties"]["DashboardName"] == "sonic-dev-eks-eks"  # type: ignore[index]


def test_a_pod_waiting_past_the_provisioning_minutes_is_a_capacity_page(eks_template: Template) -> None:
    """Karpenter's gauge of a pod's wait (seconds), against eks.alarms.provisioning_minutes (default 15)."""
    alarms = _by_id(eks_template, "AWS::CloudWatch::Alarm")
    (waiting,) = [a for logical, a in alarms.items() if logical.startswith("AlertingPodsWaiting")]
    props: dict[str, object] = waiting["Properties"]  # type: ignore[assignment]
    assert props["MetricName"] == "karpenter_pods_unstarted_time_seconds" and props["Statistic"] == "Maximum"
    assert props["Threshold"] == 15 * 60
    composites = json.dumps(_by_id(eks_template, "AWS::CloudWatch::CompositeAlarm"))
    assert "PodsWaiting" in composites
