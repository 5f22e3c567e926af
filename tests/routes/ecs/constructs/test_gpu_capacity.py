"""GpuCapacity and SingleAzPlacement: one AZ, one subnet, a cluster placement group, GPU AMI, IMDSv2."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from aws_cdk.assertions import Match, Template

from tests.conftest import rendered, resources_of


def _one(template: Template, type_name: str) -> dict[str, object]:
    found = resources_of(template, type_name)
    assert len(found) == 1, f"expected one {type_name}, found {len(found)}"
    props: dict[str, object] = next(iter(found.values()))["Properties"]
    return props


def test_cluster_placement_group_on_the_launch_template(ecs_template: Template) -> None:
    assert _one(ecs_template, "AWS::EC2::PlacementGroup")["Strategy"] == "cluster"
    group_id = next(iter(resources_of(ecs_template, "AWS::EC2::PlacementGroup")))
    ecs_template.has_resource_properties(
        "AWS::EC2::LaunchTemplate",
        {
            "LaunchTemplateData": Match.object_like(
                {"Placement": {"GroupName": {"Fn::GetAtt": [group_id, "GroupName"]}}}
            ),
        },
    )


def test_asg_in_exactly_one_subnet_in_the_configured_az(ecs_template: Template) -> None:
    group = _one(ecs_template, "AWS::AutoScaling::AutoScalingGroup")
    subnets = group["VPCZoneIdentifier"]
    assert isinstance(subnets, list) and len(subnets) == 1
    subnet = resources_of(ecs_template, "AWS::EC2::Subnet")[subnets[0]["Ref"]]
    assert subnet["Properties"]["AvailabilityZone"] == "us-east-2a"
    assert subnet["Properties"]["MapPublicIpOnLaunch"] is False
    assert (group["MinSize"], group["MaxSize"]) == ("2", "7")  # max workers + one spare for deploys


def test_launch_template_gpu_ami_imdsv2_encrypted_gp3(ecs_template: Template) -> None:
    data = _one(ecs_template, "AWS::EC2::LaunchTemplate")["LaunchTemplateData"]
    assert isinstance(data, dict)
    assert data["InstanceType"] == "g6e.xlarge"
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["BlockDeviceMappings"] == [
        {
            "DeviceName": "/dev/xvda",
            "Ebs": {"DeleteOnTermination": True, "Encrypted": True, "VolumeSize": 200, "VolumeType": "gp3"},
        }
    ]
    parameter = data["ImageId"]["Ref"]
    # The release pinned in routes/ecs/config.py's DEFAULT_GPU_AMI, not AWS's newest ("recommended").
    assert ecs_template.to_json()["Parameters"][parameter]["Default"] == (
        "/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/"
        "al2023-ami-ecs-gpu-hvm-2023.0.20260820-kernel-6.1-x86_64-ebs/image_id"
    )
    # One On-Demand type: the launch template alone, EC2's default use of open reservations.
    group = _one(ecs_template, "AWS::AutoScaling::AutoScalingGroup")
    assert "MixedInstancesPolicy" not in group and "LaunchTemplate" in group
    assert "CapacityReservationSpecification" not in group and "CapacityRebalance" not in group
    assert "ECS_ENABLE_SPOT_INSTANCE_DRAINING" not in rendered(data["UserData"]["Fn::Base64"])


def test_capacity_provider_managed_scaling_and_draining(ecs_template: Template) -> None:
    ecs_template.has_resource_properties(
        "AWS::ECS::CapacityProvider",
        {
            "AutoScalingGroupProvider": Match.object_like(
                {
                    "ManagedScaling": Match.object_like(
                        {"Status": "ENABLED", "TargetCapacity": 100, "InstanceWarmupPeriod": 300}
                    ),
                    "ManagedDraining": "ENABLED",
                }
            ),
        },
    )


def test_no_context_lookups_needed(ecs_template: Template) -> None:
    # The AZ comes from config and the AMI from a deploy-time SSM parameter: synth stays offline.
    assert "dummy" not in str(ecs_template.to_json())


def test_awsvpc_tasks_and_bridge_containers_cannot_reach_the_instance_role(ecs_template: Template) -> None:
    data = _one(ecs_template, "AWS::EC2::LaunchTemplate")["LaunchTemplateData"]
    assert isinstance(data, dict)
    assert data["MetadataOptions"] == {"HttpPutResponseHopLimit": 1, "HttpTokens": "required"}
    user_data = rendered(data["UserData"]["Fn::Base64"])
    assert "echo ECS_AWSVPC_BLOCK_IMDS=true >> /etc/ecs/ecs.config\n" in user_data
    assert "echo ECS_ENABLE_AWSLOGS_EXECUTIONROLE_OVERRIDE=true >> /etc/ecs/ecs.config\n" in user_data
    # The workers are awsvpc tasks: the agent setting is the one that applies to them.
    (worker,) = [
        t["Properties"]
        for t in resources_of(ecs_template, "AWS::ECS::TaskDefinition").values()
        if t["Properties"]["RequiresCompatibilities"] == ["EC2"]
    ]
    assert worker["NetworkMode"] == "awsvpc"


def _instance_statements(template: Template) -> list[dict[str, Any]]:
    roles = [k for k in resources_of(template, "AWS::IAM::Role") if k.startswith("GpuCapacityInstanceRole")]
    statements: list[dict[str, Any]] = []
    for policy in [
        *resources_of(template, "AWS::IAM::Policy").values(),
        *resources_of(template, "AWS::IAM::ManagedPolicy").values(),
    ]:
        if {"Ref": roles[0]} in policy["Properties"].get("Roles", []):
            statements += policy["Properties"]["PolicyDocument"]["Statement"]
    return statements


def test_instance_role_scoped_to_the_cluster_with_no_logs_or_image_access(ecs_template: Template) -> None:
    statements = _instance_statements(ecs_template)
    actions = [
        a for s in statements for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    ]
    assert not [a for a in actions if a.startswith(("logs:", "ecr:")) or "*" in a]
    (cluster,) = resources_of(ecs_template, "AWS::ECS::Cluster")
    by_sid = {s["Sid"]: s for s in statements}
    assert by_sid["RegisterAndReportInThisCluster"]["Resource"] == {"Fn::GetAtt": [cluster, "Arn"]}
    poll = by_sid["PollOnlyAsAContainerInstanceOfThisCluster"]
    assert poll["Condition"] == {"ArnEquals": {"ecs:cluster": {"Fn::GetAtt": [cluster, "Arn"]}}}
    # Every statement on "*" says why in its sid: its actions have no resource type.
    on_any = {s["Sid"]: s["Action"] for s in statements if s["Resource"] == "*"}
    assert on_any == {
        "PollOnlyAsAContainerInstanceOfThisCluster": ["ecs:Poll", "ecs:StartTelemetrySession"],
        "DiscoverPollEndpointHasNoResourceType": "ecs:DiscoverPollEndpoint",
        "PutMetricDataHasNoResourceTypeHeldToTheGpuNamespace": "cloudwatch:PutMetricData",
        "DescribeTagsHasNoResourceType": "ec2:DescribeTags",
    }


def test_each_acknowledged_wildcard_is_named(ecs_stack: Stack) -> None:
    policy = ecs_stack.node.find_child("GpuCapacity").node.find_child("InstancePolicy")
    reasons: dict[str, str] = {}
    for entry in policy.node.metadata:
        if entry.type == "aws:cdk:acknowledged-rules":
            reasons |= entry.data  # the last acknowledgement of a rule is the one that counts
    reason = reasons["AwsSolutions::AwsSolutions-IAM5[Resource::*]"]
    for action in ("ecs:Poll", "ecs:DiscoverPollEndpoint", "cloudwatch:PutMetricData", "ec2:DescribeTags"):
        assert action in reason
    assert set(reasons) == {"AwsSolutions::AwsSolutions-IAM5[Resource::*]"}


def test_instances_launch_once_the_agent_may_register(ecs_template: Template) -> None:
    (policy,) = [
        k for k in resources_of(ecs_template, "AWS::IAM::ManagedPolicy") if k.startswith("GpuCapacity")
    ]
    (launch_template,) = resources_of(ecs_template, "AWS::EC2::LaunchTemplate").values()
    assert policy in launch_template["DependsOn"]
