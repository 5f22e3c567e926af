"""GPU instances for the workers: an Auto Scaling group in one subnet and a placement group, joined to
the cluster through a capacity provider so that instances follow tasks."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from constructs import Construct

from sonic_deploy.constructs.findings import acknowledge
from sonic_deploy.constructs.placement import SingleAzPlacement


class GpuCapacity(Construct):
    """Launch template (ECS GPU AMI via its SSM parameter, IMDSv2 only, encrypted gp3 root volume, the
    cluster placement group), an ASG pinned to the placement's one subnet, and an AsgCapacityProvider with
    managed scaling and managed draining.

    The root volume uses the account's EBS encryption key: a customer key would also need a key-policy
    grant to the Auto Scaling service-linked role, which may not exist yet in a fresh account.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: ecs.Cluster,
        vpc: ec2.IVpc,
        placement: SingleAzPlacement,
        instance_type: str,
        min_instances: int,
        max_instances: int,
        root_volume_gib: int,
        instance_warmup: Duration,
    ) -> None:
        super().__init__(scope, construct_id)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="GPU instances: no ingress (tasks have their own ENIs)",
        )
        self.role = iam.Role(self, "InstanceRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
        # Boot commands; the capacity provider adds the cluster's, SonicMetrics the GPU metrics agent.
        self.user_data = ec2.UserData.for_linux()
        self.launch_template = ec2.LaunchTemplate(
            self,
            "LaunchTemplate",
            instance_type=ec2.InstanceType(instance_type),
            machine_image=ecs.EcsOptimizedImage.amazon_linux2023(ecs.AmiHardwareType.GPU),
            require_imdsv2=True,
            http_put_response_hop_limit=2,  # containers in bridge/host mode reach IMDS through one hop more
            security_group=self.security_group,
            role=self.role,
            user_data=self.user_data,
            placement_group=placement.placement_group,
            block_devices=[
                ec2.BlockDevice(
                    device_name="/dev/xvda",
                    volume=ec2.BlockDeviceVolume.ebs(
                        root_volume_gib,
                        volume_type=ec2.EbsDeviceVolumeType.GP3,
                        encrypted=True,
                        delete_on_termination=True,
                    ),
                )
            ],
        )
        self.auto_scaling_group = autoscaling.AutoScalingGroup(
            self,
            "Group",
            vpc=vpc,
            vpc_subnets=placement.subnets,
            launch_template=self.launch_template,
            min_capacity=min_instances,
            # One spare instance so a rolling deploy at 100% minimum healthy has room for a new task.
            max_capacity=max_instances + 1,
            new_instances_protected_from_scale_in=False,
        )
        acknowledge(
            self.auto_scaling_group,
            "AwsSolutions-AS3",
            reason="the capacity provider drives this group; scaling shows in ECS events and Container "
            "Insights, and GPU saturation alarms to the stack's topic",
        )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Action::ecs:Submit*]",
            "AwsSolutions-IAM5[Resource::*]",
            reason="the ECS container-instance policy CDK writes for the ECS agent (register, poll, "
            "submit state); those calls are not resource-scoped",
        )
        self.capacity_provider = ecs.AsgCapacityProvider(
            self,
            "CapacityProvider",
            auto_scaling_group=self.auto_scaling_group,
            enable_managed_scaling=True,
            enable_managed_draining=True,
            enable_managed_termination_protection=False,
            target_capacity_percent=100,
            instance_warmup_period=int(instance_warmup.to_seconds()),
        )
        cluster.add_asg_capacity_provider(self.capacity_provider)
