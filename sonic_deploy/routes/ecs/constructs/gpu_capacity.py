"""GPU instances for the workers: an Auto Scaling group in one subnet and a placement group, joined to
the cluster through a capacity provider so that instances follow tasks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from constructs import Construct

from sonic_deploy.constructs.egress import PrivateAws, https_only
from sonic_deploy.constructs.findings import acknowledge, acknowledge_compliance
from sonic_deploy.constructs.placement import SingleAzPlacement
from sonic_deploy.routes.ecs.config import ReservationUse, gpu_ami_parameter

# The GPU group's metrics the dashboard graphs: what it wants, what serves, what is still booting.
GROUP_METRICS = (
    autoscaling.GroupMetric.DESIRED_CAPACITY,
    autoscaling.GroupMetric.IN_SERVICE_INSTANCES,
    autoscaling.GroupMetric.PENDING_INSTANCES,
)
# ECS agent settings, written to /etc/ecs/ecs.config before the agent starts (after user data). From the agent's
# configuration table (aws/amazon-ecs-agent README.md, at 8dfceca6):
AGENT_CONFIG = {
    # "Whether to block access to Instance Metadata for Tasks started with awsvpc network mode": the workers
    # are awsvpc tasks (SonicService), and this is the setting AWS's ECS guide names for them ("Amazon EC2
    # container instance security considerations"). Their task role is what they get; the instance role never.
    "ECS_AWSVPC_BLOCK_IMDS": "true",
    # awslogs authenticates with the task's execution role, not the instance's (ecs-init sets it by default
    # since 1.16.0-1; written here so the instance role can go without logs permissions whatever the AMI).
    "ECS_ENABLE_AWSLOGS_EXECUTIONROLE_OVERRIDE": "true",
}
# Spot only: "the container instance is placed in DRAINING ... when it receives a Spot interruption notice", two
# minutes before EC2 takes it back (ECS Developer Guide, "Spot Instance draining"; the agent's
# ECS_ENABLE_SPOT_INSTANCE_DRAINING). The same page: ECS gets no notice of instances that Capacity Rebalancing
# removes; those go through the group's scale-in, which managed draining covers.
SPOT_AGENT_CONFIG = {"ECS_ENABLE_SPOT_INSTANCE_DRAINING": "true"}


@dataclass(frozen=True)
class GpuSupply:
    """Where the group's instances come from (config `[ecs.capacity]`).

    `instance_types`: in order of preference; with more than one, or with Spot, the group has a mixed instances
    policy (On-Demand "prioritized": the first type with capacity wins; Spot "capacity-optimized-prioritized").
    `ami`: an ECS GPU AMI release name, or "recommended" (schema.gpu_ami_parameter). `reservations`: "open"
    leaves EC2's default (a matching open reservation is used); "none" never uses one; "targeted" launches into
    `reservation_ids` first, or only (`reservations_only`)."""

    instance_types: Sequence[str]
    ami: str
    spot: bool = False
    reservations: ReservationUse = "open"
    reservation_ids: Sequence[str] = ()
    reservations_only: bool = False

    @property
    def mixed(self) -> bool:
        """A mixed instances policy: more than one type, or Spot."""
        return len(self.instance_types) > 1 or self.spot

    def reservation_specification(
        self,
    ) -> autoscaling.CfnAutoScalingGroup.CapacityReservationSpecificationProperty | None:
        """The group's CapacityReservationSpecification (EC2 Auto Scaling API Reference: preference
        capacity-reservations-only, capacity-reservations-first, none or default; targets by id), or None for
        EC2's default: "open", or "targeted" with none listed in this group's AZ (the config then refuses
        reservations_only)."""
        if self.reservations == "open" or (self.reservations == "targeted" and not self.reservation_ids):
            return None
        if self.reservations == "none":
            return autoscaling.CfnAutoScalingGroup.CapacityReservationSpecificationProperty(
                capacity_reservation_preference="none"
            )
        return autoscaling.CfnAutoScalingGroup.CapacityReservationSpecificationProperty(
            capacity_reservation_preference="capacity-reservations-only"
            if self.reservations_only
            else "capacity-reservations-first",
            capacity_reservation_target=autoscaling.CfnAutoScalingGroup.CapacityReservationTargetProperty(
                capacity_reservation_ids=list(self.reservation_ids)
            ),
        )


class GpuCapacity(Construct):
    """Launch template (ECS GPU AMI via its SSM parameter, IMDSv2 only and out of the tasks' reach, encrypted
    gp3 root volume, the cluster placement group), an ASG pinned to the placement's one subnet, and an AsgCapacityProvider with
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
        supply: GpuSupply,
        min_instances: int,
        max_instances: int,
        root_volume_gib: int,
        instance_warmup: Duration,
        private_aws: PrivateAws | None = None,
    ) -> None:
        """The hosts call out only on TCP 443 (ECS, ECR and its S3 layers, EC2, CloudWatch, the AL2023
        repositories on S3), in either licence mode, to AWS only with `private_aws`: their tasks have ENIs of
        their own."""
        super().__init__(scope, construct_id)
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=vpc,
            description="GPU instances: no ingress (tasks have their own ENIs)",
            allow_all_outbound=False,
        )
        https_only(self.security_group, private_aws)
        self.role = iam.Role(self, "InstanceRole", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
        self._on_any_resource: list[str] = []
        self.policy = self._agent_policy(cluster)
        self.allow_on_any_resource(
            "PollOnlyAsAContainerInstanceOfThisCluster",
            ["ecs:Poll", "ecs:StartTelemetrySession"],
            why="they act on the container instance, whose ARN exists only once it has registered (and takes "
            "one of two ARN formats); the ecs:cluster condition holds them to this cluster, as CDK and "
            "AmazonEC2ContainerServiceforEC2Role grant them",
            conditions={"ArnEquals": {"ecs:cluster": cluster.cluster_arn}},
        )
        self.allow_on_any_resource(
            "DiscoverPollEndpointHasNoResourceType",
            ["ecs:DiscoverPollEndpoint"],
            why="no resource type (Service Authorization Reference); it returns the endpoint to poll",
        )
        # Boot commands; the capacity provider adds the cluster's, SonicMetrics the GPU metrics agent.
        self.user_data = ec2.UserData.for_linux()
        agent_config = AGENT_CONFIG | (SPOT_AGENT_CONFIG if supply.spot else {})
        self.user_data.add_commands(
            *(f"echo {name}={value} >> /etc/ecs/ecs.config" for name, value in agent_config.items())
        )
        self.launch_template = ec2.LaunchTemplate(
            self,
            "LaunchTemplate",
            instance_type=ec2.InstanceType(supply.instance_types[0]),
            # The release named in config, resolved by CloudFormation from its SSM parameter at deploy: the same
            # image at every deploy until config names another (a reviewed diff), where
            # EcsOptimizedImage.amazon_linux2023(GPU) reads ".../gpu/recommended", AWS's newest.
            machine_image=ec2.MachineImage.from_ssm_parameter(gpu_ami_parameter(supply.ami)),
            require_imdsv2=True,
            # On the host itself (the ECS agent runs in the host's network namespace, ecs-init
            # docker/docker_config.go; the CloudWatch agent is a host process): a container in bridge mode,
            # one hop further, gets no IMDSv2 token. The awsvpc workers are blocked by ECS_AWSVPC_BLOCK_IMDS.
            http_put_response_hop_limit=1,
            security_group=self.security_group,
            # CDK's capacity-provider wiring adds its container-instance statements to the launch template's
            # role, some on "*" (logs, ECR, discovery): it gets the role without that door; `self.policy` has
            # the scoped statements instead.
            role=self.role.without_policy_updates(),
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
        # Instances launch with the agent's permissions in place (as CDK orders a role's default policy).
        self.launch_template.node.add_dependency(self.policy)
        self.auto_scaling_group = autoscaling.AutoScalingGroup(
            self,
            "Group",
            vpc=vpc,
            vpc_subnets=placement.subnets,
            **self._launch(supply),
            min_capacity=min_instances,
            # One spare instance so a rolling deploy at 100% minimum healthy has room for a new task.
            max_capacity=max_instances + 1,
            new_instances_protected_from_scale_in=False,
            # For the dashboard: EC2 Auto Scaling publishes group metrics only once collection is enabled
            # (CloudFormation AWS::AutoScaling::AutoScalingGroup MetricsCollection; free at 1-minute granularity,
            # EC2 Auto Scaling User Guide, "Monitor CloudWatch metrics for your Auto Scaling groups").
            group_metrics=[autoscaling.GroupMetrics(*GROUP_METRICS)],
        )
        if supply.mixed:
            acknowledge(
                self.auto_scaling_group,
                "AwsSolutions-EC26",
                reason="the rule cannot read a mixed instances policy's launch template (it throws); that "
                "template's one volume is encrypted, as with a single type (tests/routes/ecs/constructs/test_gpu_capacity.py)",
            )
            acknowledge_compliance(
                self.auto_scaling_group,
                "EC2IMDSv2Enabled",
                reason="the rule does not read a mixed instances policy's launch template; that template requires "
                "IMDSv2 tokens with a hop limit of 1, as with a single type (tests/compliance/test_invariants.py)",
            )
        reservation = supply.reservation_specification()
        if reservation is not None:  # no L2 property (CDK 2.275): the L1's
            group = self.auto_scaling_group.node.default_child
            assert isinstance(group, autoscaling.CfnAutoScalingGroup)
            group.capacity_reservation_specification = reservation
        acknowledge(
            self.auto_scaling_group,
            "AwsSolutions-AS3",
            reason="the capacity provider drives this group; scaling shows in ECS events and Container "
            "Insights, and GPU saturation alarms to the stack's topic",
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

    def _launch(self, supply: GpuSupply) -> dict[str, Any]:
        """The launch template alone for one On-Demand type; otherwise a mixed instances policy with the types in
        order. Spot: none On-Demand, Capacity Rebalancing on (EC2 Auto Scaling launches a replacement when EC2
        signals an elevated interruption risk, then terminates the old instance: User Guide, "Capacity
        Rebalancing")."""
        if not supply.mixed:
            return {"launch_template": self.launch_template}
        distribution = (
            autoscaling.InstancesDistribution(
                on_demand_base_capacity=0,
                on_demand_percentage_above_base_capacity=0,
                spot_allocation_strategy=autoscaling.SpotAllocationStrategy.CAPACITY_OPTIMIZED_PRIORITIZED,
            )
            if supply.spot
            else autoscaling.InstancesDistribution(
                on_demand_allocation_strategy=autoscaling.OnDemandAllocationStrategy.PRIORITIZED,
                on_demand_percentage_above_base_capacity=100,
            )
        )
        return {
            "mixed_instances_policy": autoscaling.MixedInstancesPolicy(
                launch_template=self.launch_template,
                instances_distribution=distribution,
                launch_template_overrides=[
                    autoscaling.LaunchTemplateOverrides(instance_type=ec2.InstanceType(name))
                    for name in supply.instance_types
                ],
            ),
            "capacity_rebalance": supply.spot or None,
        }

    def _agent_policy(self, cluster: ecs.Cluster) -> iam.ManagedPolicy:
        """What the ECS agent calls with the instance role, scoped as far as each action's resource types go
        (Service Authorization Reference, Amazon ECS). Nothing for images or logs: the agent pulls with each
        task's execution role (`useExecutionRole`, aws/amazon-ecs-agent agent/ecr/factory.go) and awslogs writes
        with it (ECS_ENABLE_AWSLOGS_EXECUTIONROLE_OVERRIDE); every task here has one, which CDK grants its
        repository and log group. SonicMetrics adds the host CloudWatch agent's statements."""
        policy = iam.ManagedPolicy(
            self,
            "InstancePolicy",
            description="The ECS agent on the GPU instances: join, report to and poll this cluster only",
            roles=[self.role],
            statements=[
                iam.PolicyStatement(
                    sid="RegisterAndReportInThisCluster",
                    actions=[
                        "ecs:RegisterContainerInstance",
                        "ecs:DeregisterContainerInstance",
                        "ecs:SubmitAttachmentStateChanges",
                        "ecs:SubmitContainerStateChange",
                        "ecs:SubmitTaskStateChange",
                    ],
                    resources=[cluster.cluster_arn],
                ),
            ],
        )
        return policy

    def group_metric(self, metric: autoscaling.GroupMetric) -> cloudwatch.Metric:
        """An AWS/AutoScaling group metric of the GPU group (dimension AutoScalingGroupName), one of
        GROUP_METRICS."""
        return cloudwatch.Metric(
            namespace="AWS/AutoScaling",
            metric_name=metric.name,
            statistic="Average",
            period=Duration.minutes(1),
            dimensions_map={"AutoScalingGroupName": self.auto_scaling_group.auto_scaling_group_name},
            label=metric.name.removeprefix("Group"),
        )

    def allow_on_any_resource(
        self, sid: str, actions: list[str], *, why: str, conditions: dict[str, Any] | None = None
    ) -> None:
        """A statement on "*" for actions that have no resource type; `sid` and `why` say so, and the one
        AwsSolutions-IAM5[Resource::*] acknowledgement of the policy lists every such statement."""
        self.policy.add_statements(
            iam.PolicyStatement(sid=sid, actions=actions, resources=["*"], conditions=conditions)
        )
        self._on_any_resource.append(f"{sid} ({', '.join(actions)}): {why}")
        acknowledge(self.policy, "AwsSolutions-IAM5[Resource::*]", reason="; ".join(self._on_any_resource))
