"""A second AZ for the GPU workers, used only when the first has no capacity: its own cluster placement group,
subnet and GPU group (0 instances until used), and step scaling of an overflow worker service there on the
first AZ's shortfall of GPU instances (docs/routes.md, "The single-AZ trade-off").

Why an overflow service, not a second capacity provider on the worker service: a provider with weight 0 "can't
be used to place tasks", any positive weight sends that share of tasks to the second AZ always, a task keeps the
provider it was given (ECS Developer Guide, "Capacity provider strategies"), and changing a service's strategy
needs a new deployment, a rolling replacement of every worker (aws/aws-cdk#29826). A service of its own scales
from 0 without touching the first AZ's workers.
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Duration
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from constructs import Construct

from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.constructs.egress import PrivateAws
from sonic_deploy.constructs.placement import SingleAzPlacement
from sonic_deploy.routes.ecs.constructs.gpu_capacity import GpuCapacity, GpuSupply
from sonic_deploy.routes.ecs.constructs.sonic_service import SonicService


class GpuFallback(Construct):
    """The fallback AZ's placement and GPU capacity; `scale_overflow` then drives the overflow workers."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: ecs.Cluster,
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
        availability_zone: str,
        supply: GpuSupply,
        max_instances: int,
        root_volume_gib: int,
        instance_warmup: Duration,
        alerting: Alerting,
        private_aws: PrivateAws | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.placement = SingleAzPlacement(
            self, "Placement", subnets=subnets, availability_zone=availability_zone
        )
        self.capacity = GpuCapacity(
            self,
            "GpuCapacity",
            cluster=cluster,
            vpc=vpc,
            placement=self.placement,
            supply=supply,
            # Nothing runs, and nothing is paid for, until an overflow task asks for an instance.
            min_instances=0,
            max_instances=max_instances,
            root_volume_gib=root_volume_gib,
            instance_warmup=instance_warmup,
            private_aws=private_aws,
        )
        # Pages through CapacityAtRisk: callers are served, across AZs (slower), and the first AZ is short.
        self.in_use = alerting.alarm(
            "FallbackInUse",
            metric=self.capacity.group_metric(autoscaling.GroupMetric.IN_SERVICE_INSTANCES),
            threshold=1,
            evaluation_periods=5,
            description=f"GPU instances are in service in the fallback AZ ({self.placement.availability_zone}): "
            "the first AZ had no capacity. Overflow workers reach NATS and the API server across AZs (a few ms "
            "more per hop, cross-AZ data charged). See the dashboard's capacity widgets for why.",
        )

        self.overflow: SonicService | None = None  # scale_overflow's

    def scale_overflow(
        self,
        overflow: SonicService,
        *,
        first_workers: SonicService,
        first_group: GpuCapacity,
        after: Duration,
        scale_in_after: Duration,
        start_time: Duration,
        max_tasks: int,
    ) -> None:
        """Step scaling of `overflow` (0 to `max_tasks`) on the first AZ's shortfall less the overflow's own
        desired count (`overflow_gap`): one to three tasks more once the gap has been 1 or more for `after`,
        then no more step for `start_time` (an instance's warm-up and the worker's start period); one task
        less per `scale_in_after` while the gap is -1 or less (the first AZ has its tasks back).

        CloudWatch invokes an alarm's Auto Scaling action "once per minute that the alarm remains in the new
        state" (CloudWatch User Guide, "Alarm actions"); the gap counts the overflow's desired tasks, so once
        they match the shortfall the alarm is OK and the overflow holds, rather than growing per cooldown."""
        self.overflow = overflow
        gap = overflow_gap(first_workers, first_group, overflow)
        target = appscaling.ScalableTarget(
            self,
            "OverflowTarget",
            service_namespace=appscaling.ServiceNamespace.ECS,
            resource_id=f"service/{overflow.service.cluster.cluster_name}/{overflow.service.service_name}",
            scalable_dimension="ecs:service:DesiredCount",
            min_capacity=0,
            max_capacity=max_tasks,
        )

        def step(name: str, cooldown: Duration) -> appscaling.StepScalingAction:
            return appscaling.StepScalingAction(
                self,
                name,
                scaling_target=target,
                adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
                cooldown=cooldown,
                metric_aggregation_type=appscaling.MetricAggregationType.MAXIMUM,
            )

        grow = step("GrowOverflow", start_time)
        # Bounds are relative to the alarm's threshold (a gap of 1): a gap of 1, 2, or 3 or more.
        grow.add_adjustment(adjustment=1, lower_bound=0, upper_bound=1)
        grow.add_adjustment(adjustment=2, lower_bound=1, upper_bound=2)
        grow.add_adjustment(adjustment=3, lower_bound=2)
        shrink = step("ShrinkOverflow", scale_in_after)
        # Bounds relative to the threshold (-1): a gap of -1 or less.
        shrink.add_adjustment(adjustment=-1, upper_bound=0)
        minutes = int(after.to_minutes())
        self.short_alarm = cloudwatch.Alarm(
            self,
            "FirstZoneShort",
            metric=gap,
            threshold=1,
            evaluation_periods=minutes,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"Scaling only: for {minutes} minutes the first AZ has been short of GPU workers "
            "(tasks without an instance) by more than the fallback AZ's overflow workers; the overflow grows.",
        )
        self.short_alarm.add_alarm_action(actions.ApplicationScalingAction(grow))
        quiet = int(scale_in_after.to_minutes())
        self.back_alarm = cloudwatch.Alarm(
            self,
            "FirstZoneBack",
            metric=gap,
            threshold=-1,
            evaluation_periods=quiet,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_OR_EQUAL_TO_THRESHOLD,
            # Without data, keep the overflow: callers may depend on it.
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"Scaling only: for {quiet} minutes the fallback AZ has had more overflow workers "
            "than the first AZ is short of; the overflow shrinks by one.",
        )
        self.back_alarm.add_alarm_action(actions.ApplicationScalingAction(shrink))


def overflow_gap(
    first_workers: SonicService, first_group: GpuCapacity, overflow: SonicService
) -> cloudwatch.MathExpression:
    """Per minute: how many GPU workers the first AZ is short for want of instances, less the overflow's
    desired tasks. Short is the smaller of the first AZ's desired - running tasks and its group's desired -
    in-service instances: a rolling deployment (new tasks pending beside running ones) is not short, and tasks
    that crash on instances that are in service (a licence or NATS outage, a bad image) are not short of
    instances, which the fallback AZ would not mend. FILL(x, 0) counts a metric with no data point (no task
    or instance at all) as 0 (CloudWatch User Guide, "Metric math syntax and functions": FILL; UNVERIFIED
    whether it yields points for a metric with none in the whole window)."""
    return cloudwatch.MathExpression(
        expression="MIN([desired - FILL(running, 0), wanted - FILL(serving, 0)]) - FILL(overflow, 0)",
        using_metrics={
            "desired": first_workers.task_count("DesiredTaskCount"),
            "running": first_workers.task_count("RunningTaskCount"),
            "wanted": first_group.group_metric(autoscaling.GroupMetric.DESIRED_CAPACITY),
            "serving": first_group.group_metric(autoscaling.GroupMetric.IN_SERVICE_INSTANCES),
            "overflow": overflow.task_count("DesiredTaskCount"),
        },
        label="first-AZ workers short, less overflow",
        period=Duration.minutes(1),
    )
