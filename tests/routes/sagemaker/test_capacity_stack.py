"""A SageMaker endpoint on three instance types (instance pools): the endpoint config, scaling that keeps the
busiest type at its target, the per-type alarms and dashboard row; and a reservation on a bare stack."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest
from aws_cdk import App
from aws_cdk.assertions import Match, Template

from sonic_deploy.routes.sagemaker import preflight_deployed as deployed
from tests.conftest import CONFIG_DIR, resources_of, synthesize_from
from tests.routes.sagemaker.constructs.test_sonic_endpoint import _endpoint

from .test_capacity_config import PLAN, SHIPPED_TYPES

TYPES = ["ml.g6e.xlarge", "ml.g6e.2xlarge", "ml.g6.xlarge"]


@pytest.fixture(scope="module")
def pooled(tmp_path_factory: pytest.TempPathFactory) -> Template:
    config = tmp_path_factory.mktemp("pooled") / "config"
    shutil.copytree(CONFIG_DIR, config)
    catalogue = config / "instance_types.toml"
    text = catalogue.read_text()
    catalogue.write_text(
        text.replace(SHIPPED_TYPES, SHIPPED_TYPES.replace('"]', '", "ml.g6e.2xlarge", "ml.g6.xlarge"]'))
    )
    dev = config / "environments/dev.toml"
    text = dev.read_text().replace('routes = ["sagemaker", "ecs"]', 'routes = ["sagemaker"]')  # no ECS synth
    dev.write_text(
        text
        + f"\n[sagemaker.capacity]\nfallback_types = {json.dumps(TYPES[1:])}\nprovision_timeout_s = 900\n"
    )
    return Template.from_stack(synthesize_from(config, routes=["sagemaker"])["sagemaker"])


def _variant(template: Template) -> dict[str, Any]:
    (config,) = resources_of(template, "AWS::SageMaker::EndpointConfig").values()
    (variant,) = config["Properties"]["ProductionVariants"]
    return dict(variant)


def test_the_variant_lists_the_types_by_priority(pooled: Template) -> None:
    variant = _variant(pooled)
    assert variant["InstancePools"] == [
        {"InstanceType": t, "Priority": priority} for priority, t in enumerate(TYPES, start=1)
    ]
    assert "InstanceType" not in variant  # instance pools replace it
    assert variant["VariantInstanceProvisionTimeoutInSeconds"] == 900
    assert "CapacityReservationConfig" not in variant


def test_the_shipped_variant_has_one_type(sagemaker_template: Template) -> None:
    variant = _variant(sagemaker_template)
    assert variant["InstanceType"] == "ml.g6e.xlarge"
    assert not {"InstancePools", "VariantInstanceProvisionTimeoutInSeconds"} & set(variant)


def _policy(template: Template, name: str) -> dict[str, Any]:
    (policy,) = [
        p["Properties"]
        for p in resources_of(template, "AWS::ApplicationAutoScaling::ScalingPolicy").values()
        if p["Properties"]["PolicyName"] == name
    ]
    return dict(policy["TargetTrackingScalingPolicyConfiguration"])


def _queries(configuration: dict[str, Any]) -> dict[str, Any]:
    return {q["Id"]: q for q in configuration["CustomizedMetricSpecification"]["Metrics"]}


def test_scaling_keeps_the_busiest_type_at_the_target(pooled: Template) -> None:
    streams = _policy(pooled, "StreamLoad")
    queries = _queries(streams)
    # 8, 8 and 4 streams an instance (sonic-3), each type at 0.8 of what it serves.
    assert queries["ratio"]["Expression"] == "MAX([FILL(c1, 0) / 8, FILL(c2, 0) / 8, FILL(c3, 0) / 4])"
    assert streams["TargetValue"] == 0.8
    for metric_id, instance_type in zip(["c1", "c2", "c3"], TYPES, strict=True):
        metric = queries[metric_id]["MetricStat"]["Metric"]
        assert (metric["Namespace"], metric["MetricName"]) == ("AWS/SageMaker", "ConcurrentRequestsPerModel")
        assert {"Name": "InstanceType", "Value": instance_type} in metric["Dimensions"]
        assert queries[metric_id]["ReturnData"] is False
    gpu = _policy(pooled, "GpuUtilisation")
    assert _queries(gpu)["ratio"]["Expression"] == "MAX([FILL(g1, 0) / 1, FILL(g2, 0) / 1, FILL(g3, 0) / 1])"
    assert (gpu["TargetValue"], gpu["DisableScaleIn"]) == (80.0, True)
    assert _queries(gpu)["g3"]["MetricStat"]["Metric"]["Namespace"] == "/aws/sagemaker/Endpoints"


def test_after_deploy_asks_for_what_the_stack_reads(pooled: Template) -> None:
    """`preflight --after-deploy` looks for each type's series by the policy's own names, and for the alarms of
    the scalable target the stack registers."""
    queries = _queries(_policy(pooled, "StreamLoad"))
    for metric_id in ("c1", "c2", "c3"):
        metric = queries[metric_id]["MetricStat"]["Metric"]
        assert (metric["Namespace"], metric["MetricName"]) == (deployed.NAMESPACE, deployed.CONCURRENCY)
        assert sorted(d["Name"] for d in metric["Dimensions"]) == sorted(deployed.PER_TYPE)
    (target,) = resources_of(pooled, "AWS::ApplicationAutoScaling::ScalableTarget").values()
    parts = target["Properties"]["ResourceId"]["Fn::Join"][1]
    resource_id = "".join(p if isinstance(p, str) else "sonic-dev" for p in parts)  # the endpoint's name
    assert resource_id == deployed.Deployed("sonic-dev", "AllTraffic").resource_id


def test_the_shipped_scaling_follows_the_predefined_metric(sagemaker_template: Template) -> None:
    streams = _policy(sagemaker_template, "StreamLoad")
    assert streams["PredefinedMetricSpecification"] == {
        "PredefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"
    }
    assert streams["TargetValue"] == 6.4


def test_a_fallback_type_serving_pages_as_capacity_at_risk(pooled: Template) -> None:
    alarms = resources_of(pooled, "AWS::CloudWatch::Alarm")
    (fallback_id,) = [i for i, a in alarms.items() if "FallbackInUse" in i]
    metrics = {m["Id"]: m for m in alarms[fallback_id]["Properties"]["Metrics"]}
    (expression,) = [m["Expression"] for m in metrics.values() if "Expression" in m]
    assert expression == "SUM([FILL(f2, 0), FILL(f3, 0)])"
    dimensions = [m["MetricStat"]["Metric"]["Dimensions"] for i, m in metrics.items() if i.startswith("f")]
    assert [next(d["Value"] for d in ds if d["Name"] == "InstanceType") for ds in dimensions] == TYPES[1:]
    composites = resources_of(pooled, "AWS::CloudWatch::CompositeAlarm")
    (capacity,) = [c for i, c in composites.items() if "CapacityAtRisk" in i]
    assert fallback_id in json.dumps(capacity["Properties"]["AlarmRule"])


def test_capacity_alarms_read_the_busiest_type(pooled: Template) -> None:
    alarms = resources_of(pooled, "AWS::CloudWatch::Alarm")
    (concurrency,) = [a["Properties"] for i, a in alarms.items() if "ConcurrencyAboveCapacity" in i]
    assert concurrency["Threshold"] == 1
    assert [m["Expression"] for m in concurrency["Metrics"] if "Expression" in m] == [
        "MAX([FILL(c1, 0) / 8, FILL(c2, 0) / 8, FILL(c3, 0) / 4])"
    ]
    (gpu,) = [a["Properties"] for i, a in alarms.items() if "GpuPinned" in i]
    assert gpu["Threshold"] == 95


def test_the_dashboard_shows_each_type(pooled: Template) -> None:
    (dashboard,) = resources_of(pooled, "AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    assert "Instances per type" in body and "Invocations by type" in body
    assert all(f"{t} (serves" in body for t in TYPES)


def test_a_reservation_is_the_only_source_of_instances() -> None:
    stack = _endpoint(App(), volume_key=False, instance_type="ml.g6e.xlarge", ml_reservation_arn=PLAN)
    Template.from_stack(stack).has_resource_properties(
        "AWS::SageMaker::EndpointConfig",
        {
            "ProductionVariants": [
                Match.object_like(
                    {
                        "InstanceType": "ml.g6e.xlarge",
                        "CapacityReservationConfig": {
                            "CapacityReservationPreference": "capacity-reservations-only",
                            "MlReservationArn": PLAN,
                        },
                    }
                )
            ]
        },
    )
