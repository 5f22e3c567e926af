"""StreamScaling: target tracking on streams and GPU, Cartesia's cooldowns, never CPU."""

from __future__ import annotations

import json

from aws_cdk import App, Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk.assertions import Match, Template

from sonic_deploy.constructs.scaling import StreamScaling, TrackedMetric
from tests.conftest import resources_of


def test_sagemaker_variant_is_the_scalable_target(sagemaker_template: Template) -> None:
    sagemaker_template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget",
        {
            "ServiceNamespace": "sagemaker",
            "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
            "MinCapacity": 2,
            "MaxCapacity": 4,
            "ResourceId": {
                "Fn::Join": [
                    "",
                    ["endpoint/", {"Fn::GetAtt": [Match.any_value(), "EndpointName"]}, "/variant/AllTraffic"],
                ]
            },
        },
    )


def test_stream_policy_targets_concurrency_times_ratio(sagemaker_template: Template) -> None:
    # 8 streams per ml.g6e.xlarge x 0.8 target utilisation
    sagemaker_template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyName": "StreamLoad",
            "TargetTrackingScalingPolicyConfiguration": {
                "PredefinedMetricSpecification": {
                    "PredefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"
                },
                "TargetValue": 6.4,
                "ScaleOutCooldown": 30,
                "ScaleInCooldown": 900,
                "DisableScaleIn": False,
            },
        },
    )


def test_gpu_policy_tracks_gpu_utilisation(sagemaker_template: Template) -> None:
    sagemaker_template.has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyName": "GpuUtilisation",
            "TargetTrackingScalingPolicyConfiguration": Match.object_like(
                {
                    "CustomizedMetricSpecification": Match.object_like(
                        {
                            "Namespace": "/aws/sagemaker/Endpoints",
                            "MetricName": "GPUUtilization",
                            "Statistic": "Average",
                        }
                    ),
                    "TargetValue": 80,
                    "ScaleOutCooldown": 30,
                    "ScaleInCooldown": 900,
                    # A GPU figure that stops arriving must not hold the fleet: only streams scale in.
                    "DisableScaleIn": True,
                }
            ),
        },
    )


def test_never_scales_on_cpu(sagemaker_template: Template) -> None:
    assert "CPUUtilization" not in json.dumps(
        resources_of(sagemaker_template, "AWS::ApplicationAutoScaling::ScalingPolicy")
    )


def test_metric_math_becomes_metric_data_queries() -> None:
    stack = Stack(App(), "Test")
    load = cloudwatch.Metric(
        namespace="Sonic",
        metric_name="inferno_worker_load",
        statistic="Sum",
        dimensions_map={"ClusterName": "c"},
    )
    capacity = cloudwatch.Metric(
        namespace="Sonic",
        metric_name="inferno_worker_capacity",
        statistic="Sum",
        dimensions_map={"ClusterName": "c"},
    )
    gpu = cloudwatch.Metric(
        namespace="CWAgent", metric_name="nvidia_smi_utilization_gpu", statistic="Average"
    )
    StreamScaling(
        stack,
        "Scaling",
        service_namespace=appscaling.ServiceNamespace.ECS,
        resource_id="service/cluster/workers",
        scalable_dimension="ecs:service:DesiredCount",
        min_capacity=2,
        max_capacity=6,
        streams=TrackedMetric.math("load / capacity", {"load": load, "capacity": capacity}),
        streams_target=0.8,
        gpu=TrackedMetric.single(gpu),
        gpu_target_percent=80,
        scale_in_cooldown=Duration.seconds(600),
    )
    Template.from_stack(stack).has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalingPolicy",
        {
            "PolicyName": "StreamLoad",
            "TargetTrackingScalingPolicyConfiguration": {
                "CustomizedMetricSpecification": {
                    "Metrics": [
                        {
                            "Id": "load",
                            "ReturnData": False,
                            "MetricStat": {
                                "Stat": "Sum",
                                "Metric": {
                                    "Namespace": "Sonic",
                                    "MetricName": "inferno_worker_load",
                                    "Dimensions": [{"Name": "ClusterName", "Value": "c"}],
                                },
                            },
                        },
                        {
                            "Id": "capacity",
                            "ReturnData": False,
                            "MetricStat": Match.object_like({"Stat": "Sum"}),
                        },
                        {
                            "Id": "ratio",
                            "Expression": "load / capacity",
                            "ReturnData": True,
                            "Label": "tracked ratio",
                        },
                    ]
                },
                "TargetValue": 0.8,
                "ScaleOutCooldown": 30,
                "ScaleInCooldown": 600,
                "DisableScaleIn": False,
            },
        },
    )
