"""GpuCapacity and SingleAzPlacement: one AZ, one subnet, a cluster placement group, GPU AMI, IMDSv2."""

from __future__ import annotations

from aws_cdk.assertions import Match, Template

from tests.conftest import resources_of


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
    assert ecs_template.to_json()["Parameters"][parameter]["Default"] == (
        "/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/recommended/image_id"
    )


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
