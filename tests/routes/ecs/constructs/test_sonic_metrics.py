"""SonicMetrics: generated agent configs, the agent on each GPU host, the scraper; ECS scaling and alarms built on them."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

from aws_cdk.assertions import Match, Template

from sonic_deploy.routes.ecs.constructs.sonic_metrics import (
    HOST_AGENT_CONFIG,
    HOST_SCRIPT,
    gpu_agent_config,
    prometheus_config,
    scraper_agent_config,
)
from sonic_deploy.routes.ecs.constructs.worker_ttfa import WorkerTtfa
from tests.conftest import rendered, resources_of


def _user_data(template: Template) -> str:
    """The GPU hosts' user data as the instance receives it, CloudFormation references as CFN_Ref."""
    (launch_template,) = resources_of(template, "AWS::EC2::LaunchTemplate").values()
    return rendered(launch_template["Properties"]["LaunchTemplateData"]["UserData"]["Fn::Base64"])


def test_gpu_metrics_come_from_an_agent_on_each_gpu_host(ecs_template: Template) -> None:
    """Not a daemon task: one that reserves no GPU runs under runc and sees no GPU (SonicMetrics)."""
    script = _user_data(ecs_template)
    written = script.split("<<'SONIC_GPU_AGENT'\n", 1)[1].split("\nSONIC_GPU_AGENT\n", 1)[0]
    config = json.loads(written)
    assert config == json.loads(json.dumps(gpu_agent_config()))
    assert "utilization_gpu" in config["metrics"]["metrics_collected"]["nvidia_gpu"]["measurement"]
    assert config["metrics"]["aggregation_dimensions"] == [["AutoScalingGroupName"]]
    assert "dnf install -y --disablerepo='*' --enablerepo=amazonlinux" in script
    assert f"-a fetch-config -m ec2 -s -c file:{HOST_AGENT_CONFIG}" in script
    # The cluster's own line is still there, and ECS keeps the agent's memory free.
    assert "ECS_CLUSTER=CFN_Ref >> /etc/ecs/ecs.config" in script
    assert "echo ECS_RESERVED_MEMORY=256 >> /etc/ecs/ecs.config" in script
    assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0
    # The install runs beside the boot (a systemd unit), so it cannot hold the ECS agent's start.
    installer = script.split("<<'SONIC_GPU_INSTALL'\n", 1)[1].split("\nSONIC_GPU_INSTALL\n", 1)[0]
    assert subprocess.run(["bash", "-n"], input=installer, text=True, check=False).returncode == 0
    assert "dnf install" in installer and "dnf install" not in script.replace(installer, "")
    assert f"systemd-run --no-block --unit=sonic-gpu-metrics /bin/bash {HOST_SCRIPT}" in script
    ecs_template.resource_properties_count_is("AWS::ECS::Service", {"SchedulingStrategy": "DAEMON"}, 0)
    assert "NVIDIA_VISIBLE_DEVICES" not in json.dumps(resources_of(ecs_template, "AWS::ECS::TaskDefinition"))


def test_gpu_host_role_may_publish_gpu_metrics_and_read_its_group_tag(ecs_template: Template) -> None:
    (policy,) = [
        r["Properties"]
        for key, r in resources_of(ecs_template, "AWS::IAM::ManagedPolicy").items()
        if key.startswith("GpuCapacityInstancePolicy")
    ]
    statements = {s["Sid"]: s for s in policy["PolicyDocument"]["Statement"]}
    metrics = statements["PutMetricDataHasNoResourceTypeHeldToTheGpuNamespace"]
    assert metrics["Action"] == "cloudwatch:PutMetricData"
    assert metrics["Condition"] == {"StringEquals": {"cloudwatch:namespace": "CWAgent"}}
    assert statements["DescribeTagsHasNoResourceType"]["Action"] == "ec2:DescribeTags"
    # Not CloudWatchAgentServerPolicy: the host agent writes no logs, and that policy writes logs on "*".
    (role,) = [
        r for k, r in resources_of(ecs_template, "AWS::IAM::Role").items() if k.startswith("GpuCapacity")
    ]
    assert "ManagedPolicyArns" not in role["Properties"]


def test_scraper_config_selects_worker_and_api_series() -> None:
    config = scraper_agent_config(
        cluster_name="c",
        log_group_name="g",
        worker_job="gpu-worker",
        api_job="api-server",
        worker_ttfa=WorkerTtfa(),
    )
    declarations = config["logs"]["metrics_collected"]["prometheus"]["emf_processor"]["metric_declaration"]
    worker, api = declarations
    assert worker["label_matcher"] == "^gpu-worker$"
    assert set(worker["metric_selectors"]) >= {
        "^inferno_worker_load$",
        "^inferno_worker_capacity$",
        "^inferno_worker_ttfa$",
    }
    assert set(api["metric_selectors"]) == {"^api_queue_size$", "^api_unserviceable_requests_size$"}
    assert "cwagent_ecs_auto_sd.yaml" in prometheus_config()


def test_workers_labelled_for_discovery_and_scrapeable(ecs_template: Template) -> None:
    worker = next(
        d
        for t in resources_of(ecs_template, "AWS::ECS::TaskDefinition").values()
        for d in t["Properties"]["ContainerDefinitions"]
        if d["Name"] == "gpu-worker"
    )
    assert worker["DockerLabels"] == {
        "ECS_PROMETHEUS_EXPORTER_PORT": "8080",
        "ECS_PROMETHEUS_JOB_NAME": "gpu-worker",
    }
    ecs_template.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {
            "FromPort": 8080,
            "Description": "Prometheus scrape",
            "SourceSecurityGroupId": {
                "Fn::GetAtt": [Match.string_like_regexp("^MetricsScraperSecurityGroup"), "GroupId"]
            },
        },
    )


def _policy(template: Template, name: str) -> dict[str, Any]:
    for policy in resources_of(template, "AWS::ApplicationAutoScaling::ScalingPolicy").values():
        if policy["Properties"]["PolicyName"] == name:
            return dict(policy["Properties"]["TargetTrackingScalingPolicyConfiguration"])
    raise AssertionError(name)


def test_worker_scaling_on_load_over_capacity_by_metric_math(ecs_template: Template) -> None:
    ecs_template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {
            "ServiceNamespace": "ecs",
            "ScalableDimension": "ecs:service:DesiredCount",
            "MinCapacity": 2,
            "MaxCapacity": 6,
        },
    )
    streams = _policy(ecs_template, "StreamLoad")
    metrics = streams["CustomizedMetricSpecification"]["Metrics"]
    assert [m["Id"] for m in metrics] == ["load", "capacity", "ratio"]
    assert metrics[2]["Expression"] == "load / capacity" and metrics[2]["ReturnData"] is True
    assert {m["MetricStat"]["Metric"]["MetricName"] for m in metrics[:2]} == {
        "inferno_worker_load",
        "inferno_worker_capacity",
    }
    assert (streams["TargetValue"], streams["ScaleOutCooldown"], streams["ScaleInCooldown"]) == (0.8, 30, 900)
    gpu = _policy(ecs_template, "GpuUtilisation")
    assert gpu["CustomizedMetricSpecification"]["MetricName"] == "nvidia_smi_utilization_gpu"
    assert gpu["TargetValue"] == 80


def _alarms(template: Template) -> dict[str, dict[str, Any]]:
    """Alarm construct name (its logical ID without "Alerting" and the hash) -> properties."""
    found = {}
    for key, alarm in resources_of(template, "AWS::CloudWatch::Alarm").items():
        name = re.sub(r"[0-9A-F]{8}$", "", key)
        found[name.removeprefix("Alerting")] = alarm["Properties"]
    return found


def test_ecs_alarms(ecs_template: Template) -> None:
    alarms = _alarms(ecs_template)
    assert set(alarms) == {
        "NoWorkerCapacity",
        "WorkerMetricsMissing",
        "UnserviceableRequests",
        "WorkerTtfaP95",
        "GpuMetricsMissing",
        "GpuPinned",
        "UnhealthyApiTargets",
        "WorkerCapacityExhausted",
        "NoHealthyApiTargets",
        "WorkerTasksWaiting",
        "GpuLaunchesFailing",
    }
    # No samples at all is WorkerMetricsMissing's (test_operations.py), not callers affected.
    assert alarms["NoWorkerCapacity"]["TreatMissingData"] == "notBreaching"
    assert (
        alarms["UnserviceableRequests"]["Threshold"],
        alarms["UnserviceableRequests"]["ComparisonOperator"],
    ) == (0, "GreaterThanThreshold")
    assert (
        alarms["WorkerTtfaP95"]["ExtendedStatistic"],
        alarms["WorkerTtfaP95"]["Threshold"],
    ) == ("p95", 200)


def test_gpu_metrics_that_stop_arriving_raise_an_alarm(ecs_template: Template) -> None:
    missing = _alarms(ecs_template)["GpuMetricsMissing"]
    assert (missing["MetricName"], missing["Statistic"]) == ("nvidia_smi_utilization_gpu", "SampleCount")
    assert (missing["ComparisonOperator"], missing["Threshold"]) == ("LessThanThreshold", 1)
    assert missing["TreatMissingData"] == "breaching"


def test_a_missing_gpu_metric_cannot_hold_the_fleet(ecs_template: Template) -> None:
    """Only the stream policy votes on scale-in; the GPU policy only adds capacity (StreamScaling)."""
    assert _policy(ecs_template, "GpuUtilisation")["DisableScaleIn"] is True
    assert _policy(ecs_template, "StreamLoad")["DisableScaleIn"] is False
