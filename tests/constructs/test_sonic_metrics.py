"""SonicMetrics: generated agent configs, the GPU daemon, the scraper; ECS scaling and alarms built on them."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Match, Template

from sonic_deploy.constructs.sonic_metrics import gpu_agent_config, prometheus_config, scraper_agent_config
from tests.conftest import resources_of


def _agent_env(template: Template, family_prefix: str) -> dict[str, str]:
    for key, task in resources_of(template, "AWS::ECS::TaskDefinition").items():
        if key.startswith(family_prefix):
            env = task["Properties"]["ContainerDefinitions"][0]["Environment"]
            return {e["Name"]: e["Value"] for e in env}
    raise AssertionError(family_prefix)


def test_gpu_daemon_on_every_instance_publishes_nvidia_gpu(ecs_template: Template) -> None:
    ecs_template.has_resource_properties(
        "AWS::ECS::Service", {"SchedulingStrategy": "DAEMON", "LaunchType": "EC2"}
    )
    env = _agent_env(ecs_template, "MetricsGpuAgentTask")
    config = json.loads(env["CW_CONFIG_CONTENT"])
    assert config == json.loads(json.dumps(gpu_agent_config()))
    assert "utilization_gpu" in config["metrics"]["metrics_collected"]["nvidia_gpu"]["measurement"]
    assert config["metrics"]["aggregation_dimensions"] == [["AutoScalingGroupName"]]
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"


def test_scraper_config_selects_worker_and_api_series() -> None:
    config = scraper_agent_config(
        cluster_name="c", log_group_name="g", worker_job="gpu-worker", api_job="api-server"
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


def test_ecs_alarms(ecs_template: Template) -> None:
    alarms = {
        a["Properties"]["MetricName"]: a["Properties"]
        for a in resources_of(ecs_template, "AWS::CloudWatch::Alarm").values()
    }
    assert set(alarms) == {
        "inferno_worker_capacity",
        "api_unserviceable_requests_size",
        "inferno_worker_ttfa",
        "nvidia_smi_utilization_gpu",
        "UnHealthyHostCount",
    }
    assert alarms["inferno_worker_capacity"]["TreatMissingData"] == "breaching"
    assert (
        alarms["api_unserviceable_requests_size"]["Threshold"],
        alarms["api_unserviceable_requests_size"]["ComparisonOperator"],
    ) == (0, "GreaterThanThreshold")
    assert (
        alarms["inferno_worker_ttfa"]["ExtendedStatistic"],
        alarms["inferno_worker_ttfa"]["Threshold"],
    ) == ("p95", 200)
