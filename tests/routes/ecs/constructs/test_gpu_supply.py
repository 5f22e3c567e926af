"""`[ecs.capacity]` in the templates: more instance types in order, the AMI by release, Spot in dev,
targeted capacity reservations, and a fallback AZ with its own placement group, GPU group and overflow
workers (docs/routes.md, "The single-AZ trade-off")."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from tests.conftest import CONFIG_DIR, rendered, resources_of, synthesize_from

PRIMARY_RESERVATION = "cr-0a1b2c3d4e5f60718"
FALLBACK_RESERVATION = "cr-0f1e2d3c4b5a69788"

RESERVED_WITH_FALLBACK = f"""
[ecs.capacity]
instance_types = ["g6e.2xlarge", "g6.2xlarge"]
reservations = "targeted"
reservations_only = true

[[ecs.capacity.reservation]]
id = "{PRIMARY_RESERVATION}"
availability_zone = "us-east-2a"
instance_type = "g6e.xlarge"

[[ecs.capacity.reservation]]
id = "{FALLBACK_RESERVATION}"
availability_zone = "us-east-2b"
instance_type = "g6.2xlarge"

[ecs.capacity.fallback]
availability_zone = "us-east-2b"
instance_types = ["g6.2xlarge", "g6e.xlarge"]
after_minutes = 12
scale_in_minutes = 45
"""

SPOT_RECOMMENDED = """
[ecs.capacity]
instance_types = ["g6.2xlarge"]
market = "spot"
ami = "recommended"
reservations = "none"
"""


def _variant(tmp_path_factory: pytest.TempPathFactory, name: str, table: str) -> Template:
    config = tmp_path_factory.mktemp(name) / "config"
    shutil.copytree(CONFIG_DIR, config)
    dev = config / "environments/dev.toml"
    dev.write_text(dev.read_text() + table)
    return Template.from_stack(synthesize_from(Path(config), routes=["ecs"])["ecs"])


@pytest.fixture(scope="module")
def reserved(tmp_path_factory: pytest.TempPathFactory) -> Template:
    return _variant(tmp_path_factory, "reserved", RESERVED_WITH_FALLBACK)


@pytest.fixture(scope="module")
def spot(tmp_path_factory: pytest.TempPathFactory) -> Template:
    return _variant(tmp_path_factory, "spot", SPOT_RECOMMENDED)


def _groups(template: Template) -> dict[str, dict[str, Any]]:
    """The GPU groups by the AZ of their one subnet."""
    subnets = resources_of(template, "AWS::EC2::Subnet")
    groups = {}
    for group in resources_of(template, "AWS::AutoScaling::AutoScalingGroup").values():
        (subnet,) = group["Properties"]["VPCZoneIdentifier"]
        groups[subnets[subnet["Ref"]]["Properties"]["AvailabilityZone"]] = group["Properties"]
    return groups


def _overrides(group: dict[str, Any]) -> list[str]:
    policy = group["MixedInstancesPolicy"]
    return [o["InstanceType"] for o in policy["LaunchTemplate"]["Overrides"]]


def test_types_in_order_prioritized_on_demand(reserved: Template) -> None:
    groups = _groups(reserved)
    assert set(groups) == {"us-east-2a", "us-east-2b"}
    assert _overrides(groups["us-east-2a"]) == ["g6e.xlarge", "g6e.2xlarge", "g6.2xlarge"]
    assert _overrides(groups["us-east-2b"]) == ["g6.2xlarge", "g6e.xlarge"]
    for group in groups.values():
        assert group["MixedInstancesPolicy"]["InstancesDistribution"] == {
            "OnDemandAllocationStrategy": "prioritized",
            "OnDemandPercentageAboveBaseCapacity": 100,
        }
        assert "CapacityRebalance" not in group


def test_targeted_reservations_per_zone(reserved: Template) -> None:
    groups = _groups(reserved)
    # reservations_only: each group launches into its AZ's reservations and nowhere else.
    assert groups["us-east-2a"]["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationIds": [PRIMARY_RESERVATION]},
    }
    assert groups["us-east-2b"]["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationIds": [FALLBACK_RESERVATION]},
    }


def test_fallback_has_its_own_placement_group_and_starts_empty(reserved: Template) -> None:
    groups = _groups(reserved)
    assert (groups["us-east-2a"]["MinSize"], groups["us-east-2a"]["MaxSize"]) == ("2", "7")
    assert (groups["us-east-2b"]["MinSize"], groups["us-east-2b"]["MaxSize"]) == ("0", "7")
    placement_groups = resources_of(reserved, "AWS::EC2::PlacementGroup")
    assert len(placement_groups) == 2
    templates = resources_of(reserved, "AWS::EC2::LaunchTemplate").values()
    used = {
        t["Properties"]["LaunchTemplateData"]["Placement"]["GroupName"]["Fn::GetAtt"][0] for t in templates
    }
    assert used == set(placement_groups)
    outputs = reserved.to_json()["Outputs"]
    for name in (
        "PlacementGroupName",
        "PlacementGroupArn",
        "FallbackPlacementGroupName",
        "FallbackPlacementGroupArn",
    ):
        assert name in outputs
    assert outputs["FallbackAvailabilityZone"]["Value"] == "us-east-2b"
    assert ":placement-group/" in rendered(outputs["FallbackPlacementGroupArn"]["Value"])
    # Each group has its capacity provider on the cluster.
    (association,) = resources_of(reserved, "AWS::ECS::ClusterCapacityProviderAssociations").values()
    assert len(association["Properties"]["CapacityProviders"]) == 2


def _worker_services(template: Template) -> dict[str, dict[str, Any]]:
    services = resources_of(template, "AWS::ECS::Service")
    return {
        key: s["Properties"] for key, s in services.items() if "CapacityProviderStrategy" in s["Properties"]
    }


def test_overflow_workers_in_the_fallback_subnet_on_its_provider(reserved: Template) -> None:
    workers = _worker_services(reserved)
    assert len(workers) == 2
    (overflow_id,) = [k for k in workers if k.startswith("SonicOverflowWorker")]
    overflow, first = workers.pop(overflow_id), next(iter(workers.values()))
    assert "DesiredCount" not in overflow  # its scalable target's (test_autoscaled_services_...)
    assert overflow["CapacityProviderStrategy"] != first["CapacityProviderStrategy"]
    subnets = resources_of(reserved, "AWS::EC2::Subnet")
    (subnet,) = overflow["NetworkConfiguration"]["AwsvpcConfiguration"]["Subnets"]
    assert subnets[subnet["Ref"]]["Properties"]["AvailabilityZone"] == "us-east-2b"
    # Its metrics join the workers' job: one fleet to the scaling and the alarms.
    definitions = resources_of(reserved, "AWS::ECS::TaskDefinition")
    task = definitions[overflow["TaskDefinition"]["Ref"]]["Properties"]["ContainerDefinitions"][0]
    assert task["DockerLabels"]["ECS_PROMETHEUS_JOB_NAME"] == "gpu-worker"
    # Told where NATS and the licence proxy are, as the first-AZ workers are.
    told = {v["Name"]: v["Value"] for v in task["Environment"]}
    assert told["REPLACE-ME_NATS_URL"] == "nats://nats.sonic.internal:4222"
    # It may reach NATS like the first-AZ workers.
    group = overflow["NetworkConfiguration"]["AwsvpcConfiguration"]["SecurityGroups"][0]
    ingress = [
        r["Properties"]
        for r in resources_of(reserved, "AWS::EC2::SecurityGroupIngress").values()
        if r["Properties"].get("SourceSecurityGroupId") == group
    ]
    assert any("NATS" in r["Description"] for r in ingress)


def test_overflow_follows_the_first_zone_shortfall(reserved: Template) -> None:
    targets = [
        t["Properties"]
        for t in resources_of(reserved, "AWS::ApplicationAutoScaling::ScalableTarget").values()
        if "SonicOverflowWorkerService" in str(t["Properties"]["ResourceId"])
    ]
    assert [(t["MinCapacity"], t["MaxCapacity"]) for t in targets] == [(0, 6)]
    policies = {
        p["Properties"]["PolicyName"]: p["Properties"]["StepScalingPolicyConfiguration"]
        for p in resources_of(reserved, "AWS::ApplicationAutoScaling::ScalingPolicy").values()
        if p["Properties"]["PolicyType"] == "StepScaling"
    }
    grow = next(v for k, v in policies.items() if "GrowOverflow" in k)
    shrink = next(v for k, v in policies.items() if "ShrinkOverflow" in k)
    assert [s["ScalingAdjustment"] for s in grow["StepAdjustments"]] == [1, 2, 3]
    assert grow["Cooldown"] == 600  # instance warm-up 300 s + worker start period 300 s
    assert shrink["StepAdjustments"] == [{"MetricIntervalUpperBound": 0, "ScalingAdjustment": -1}]
    assert shrink["Cooldown"] == 45 * 60
    assert grow["MetricAggregationType"] == shrink["MetricAggregationType"] == "Maximum"
    assert grow["AdjustmentType"] == shrink["AdjustmentType"] == "ChangeInCapacity"
    # Relative to the alarm's threshold of 1: a gap of 1, of 2, of 3 or more.
    assert [
        (s.get("MetricIntervalLowerBound"), s.get("MetricIntervalUpperBound"))
        for s in grow["StepAdjustments"]
    ] == [
        (0, 1),
        (1, 2),
        (2, None),
    ]
    alarms = {
        key: a["Properties"]
        for key, a in resources_of(reserved, "AWS::CloudWatch::Alarm").items()
        if key.startswith("Fallback")
    }
    policy_ids = {
        p["Properties"]["PolicyName"]: key
        for key, p in resources_of(reserved, "AWS::ApplicationAutoScaling::ScalingPolicy").items()
    }
    short = next(a for k, a in alarms.items() if "FirstZoneShort" in k)
    assert (short["EvaluationPeriods"], short["Threshold"]) == (12, 1)
    assert short["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    (grow_id,) = [v for k, v in policy_ids.items() if "GrowOverflow" in k]
    assert short["AlarmActions"] == [{"Ref": grow_id}]
    (expression,) = [m["Expression"] for m in short["Metrics"] if "Expression" in m]
    assert expression == "MIN([desired - FILL(running, 0), wanted - FILL(serving, 0)]) - FILL(overflow, 0)"
    by_id = {m["Id"]: m["MetricStat"]["Metric"] for m in short["Metrics"] if "MetricStat" in m}
    assert {i: m["MetricName"] for i, m in by_id.items()} == {
        "desired": "DesiredTaskCount",
        "running": "RunningTaskCount",
        "wanted": "GroupDesiredCapacity",
        "serving": "GroupInServiceInstances",
        "overflow": "DesiredTaskCount",
    }

    def dimension(metric_id: str, name: str) -> str:
        (value,) = [d["Value"] for d in by_id[metric_id]["Dimensions"] if d["Name"] == name]
        return str(next(iter(value.values()))[0] if "Fn::GetAtt" in value else value["Ref"])

    # The first AZ's workers and group; the overflow's own desired count.
    assert dimension("desired", "ServiceName").startswith("SonicGpuWorkerService")
    assert dimension("running", "ServiceName").startswith("SonicGpuWorkerService")
    assert dimension("wanted", "AutoScalingGroupName").startswith("GpuCapacityGroup")
    assert dimension("overflow", "ServiceName").startswith("SonicOverflowWorkerService")
    back = next(a for k, a in alarms.items() if "FirstZoneBack" in k)
    assert (back["EvaluationPeriods"], back["Threshold"]) == (45, -1)
    assert back["ComparisonOperator"] == "LessThanOrEqualToThreshold"
    assert back["TreatMissingData"] == "notBreaching"
    (shrink_id,) = [v for k, v in policy_ids.items() if "ShrinkOverflow" in k]
    assert back["AlarmActions"] == [{"Ref": shrink_id}]


def test_fallback_in_use_pages_as_capacity_at_risk(reserved: Template) -> None:
    alarms = resources_of(reserved, "AWS::CloudWatch::Alarm")
    (in_use,) = [k for k in alarms if "FallbackInUse" in k]
    props = alarms[in_use]["Properties"]
    (metric,) = [m["MetricStat"]["Metric"] for m in props.get("Metrics", [])] or [props]
    assert metric["MetricName"] == "GroupInServiceInstances"
    (dimension,) = metric["Dimensions"]
    assert dimension["Value"]["Ref"].startswith("FallbackGpuCapacityGroup")
    composites = resources_of(reserved, "AWS::CloudWatch::CompositeAlarm")
    (at_risk,) = [c for k, c in composites.items() if "CapacityAtRisk" in k]
    assert in_use in str(at_risk["Properties"]["AlarmRule"])


def test_fallback_hosts_publish_gpu_metrics(reserved: Template) -> None:
    templates = resources_of(reserved, "AWS::EC2::LaunchTemplate").values()
    assert len(templates) == 2
    for template in templates:
        user_data = rendered(template["Properties"]["LaunchTemplateData"]["UserData"]["Fn::Base64"])
        assert "--unit=sonic-gpu-metrics" in user_data


def test_spot_in_dev_rebalances_and_drains(spot: Template) -> None:
    (group,) = _groups(spot).values()
    assert group["CapacityRebalance"] is True
    assert group["MixedInstancesPolicy"]["InstancesDistribution"] == {
        "OnDemandBaseCapacity": 0,
        "OnDemandPercentageAboveBaseCapacity": 0,
        "SpotAllocationStrategy": "capacity-optimized-prioritized",
    }
    assert _overrides(group) == ["g6e.xlarge", "g6.2xlarge"]
    assert group["CapacityReservationSpecification"] == {"CapacityReservationPreference": "none"}
    (template,) = resources_of(spot, "AWS::EC2::LaunchTemplate").values()
    data = template["Properties"]["LaunchTemplateData"]
    assert "echo ECS_ENABLE_SPOT_INSTANCE_DRAINING=true >> /etc/ecs/ecs.config\n" in rendered(
        data["UserData"]["Fn::Base64"]
    )
    parameter = data["ImageId"]["Ref"]
    assert spot.to_json()["Parameters"][parameter]["Default"] == (
        "/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/recommended/image_id"
    )


def test_spot_keeps_managed_draining(spot: Template) -> None:
    spot.has_resource_properties(
        "AWS::ECS::CapacityProvider",
        {"AutoScalingGroupProvider": Match.object_like({"ManagedDraining": "ENABLED"})},
    )


FALLBACK_ONLY_RESERVED = f"""
[ecs.capacity]
reservations = "targeted"

[[ecs.capacity.reservation]]
id = "{FALLBACK_RESERVATION}"
availability_zone = "us-east-2b"
instance_type = "g6e.xlarge"

[ecs.capacity.fallback]
availability_zone = "us-east-2b"
"""


@pytest.fixture(scope="module")
def fallback_reserved(tmp_path_factory: pytest.TempPathFactory) -> Template:
    return _variant(tmp_path_factory, "fallback-reserved", FALLBACK_ONLY_RESERVED)


def test_one_type_targets_its_reservation_on_the_launch_template_path(fallback_reserved: Template) -> None:
    groups = _groups(fallback_reserved)
    for group in groups.values():
        assert "MixedInstancesPolicy" not in group and "LaunchTemplate" in group
    assert groups["us-east-2b"]["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "capacity-reservations-first",
        "CapacityReservationTarget": {"CapacityReservationIds": [FALLBACK_RESERVATION]},
    }
    # Nothing listed in the first AZ: EC2's default there, never an empty target.
    assert "CapacityReservationSpecification" not in groups["us-east-2a"]


def test_fallback_launches_and_overflow_placements_are_seen(reserved: Template) -> None:
    rules = {
        key: r["Properties"]["EventPattern"] for key, r in resources_of(reserved, "AWS::Events::Rule").items()
    }
    (launches,) = [p for k, p in rules.items() if "LaunchFailures" in k]
    groups = sorted(g["Ref"] for g in launches["detail"]["AutoScalingGroupName"])
    assert [g.split("Group")[0] for g in groups] == ["FallbackGpuCapacity", "GpuCapacity"]
    (placements,) = [p for k, p in rules.items() if "PlacementFailures" in k]
    services = sorted(s["Ref"] for s in placements["resources"])
    assert [s.split("Service")[0] for s in services] == ["SonicGpuWorker", "SonicOverflowWorker"]


def test_the_dashboard_shows_the_fallback_in_service(reserved: Template) -> None:
    (dashboard,) = resources_of(reserved, "AWS::CloudWatch::Dashboard").values()
    body = str(dashboard["Properties"]["DashboardBody"])
    assert "fallback AZ in service" in body


def _scaled_services(template: Template) -> set[str]:
    """The services an ECS scalable target names (its ResourceId joins the service's Name)."""
    names = set()
    for target in resources_of(template, "AWS::ApplicationAutoScaling::ScalableTarget").values():
        parts = target["Properties"]["ResourceId"]["Fn::Join"][1]
        names |= {part["Fn::GetAtt"][0] for part in parts if isinstance(part, dict) and "Fn::GetAtt" in part}
    return names


def test_autoscaled_services_leave_desired_count_out(ecs_template: Template, reserved: Template) -> None:
    """CloudFormation re-sends a DesiredCount on every update of the service: a deploy at peak would cut the
    fleet back to it (aws/containers-roadmap#493). Where a scalable target owns the count, the template has
    none; every other service keeps its own."""
    for template, scaled in (
        (ecs_template, {"SonicGpuWorker"}),
        (reserved, {"SonicGpuWorker", "SonicOverflowWorker"}),
    ):
        owned = _scaled_services(template)
        assert len(owned) == len(scaled)
        assert {prefix for prefix in scaled for name in owned if name.startswith(prefix)} == scaled
        for logical_id, service in resources_of(template, "AWS::ECS::Service").items():
            assert ("DesiredCount" in service["Properties"]) is (logical_id not in owned), logical_id


def test_the_fallback_hosts_reach_aws_only_as_the_first_azs_do(reserved: Template) -> None:
    """Connected: both AZs' GPU hosts call out on 443 to the endpoints' group and S3's prefix list only."""
    hosts = {
        k: g
        for k, g in resources_of(reserved, "AWS::EC2::SecurityGroup").items()
        if g["Properties"]["GroupDescription"].startswith("GPU instances")
    }
    assert len(hosts) == 2, sorted(hosts)
    prefix_lists = {
        rule["Properties"]["GroupId"]["Fn::GetAtt"][0]
        for rule in resources_of(reserved, "AWS::EC2::SecurityGroupEgress").values()
        if "DestinationPrefixListId" in rule["Properties"]
    }
    for name, group in hosts.items():
        (rule,) = group["Properties"]["SecurityGroupEgress"]
        assert "CidrIp" not in rule and rule["FromPort"] == 443, name
        assert name in prefix_lists
