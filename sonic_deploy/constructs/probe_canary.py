"""The first-audio canary: an EventBridge Scheduler schedule that starts the probe task every few minutes, a
few short requests through the caller's path, publishing TTFA and success as CloudWatch metrics."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_scheduler as scheduler
from constructs import Construct

from sonic_deploy.config.schema import CanaryConfig
from sonic_deploy.constructs.probe_task import CONTAINER_NAME, ProbeTask

CANARY_OUT = "/tmp/canary"  # the task's writable volume (probe_task.py)
# A run that cannot start is not retried: the next one is a few minutes away, and a late run would measure a
# different minute than the one it is published under. Scheduler's least event age is 60 s ("RetryPolicy":
# MaximumEventAgeInSeconds 60-86400, MaximumRetryAttempts 0-185; EventBridge Scheduler API Reference), against
# its default of 24 hours and 185 retries.
MAX_EVENT_AGE = Duration.seconds(60)
MAX_RETRIES = 0


def canary_command(target: Sequence[str], canary: CanaryConfig, environment_name: str) -> list[str]:
    """The probe's argv for one canary run (the contract in the issue's brief): the route's `target`
    (`probe ws --url ...` or `probe sagemaker --endpoint ...`), then the canary's own options."""
    return [
        *target,
        "--concurrency",
        "1",
        "--requests",
        str(canary.requests),
        "--warmup",
        "1",
        "--transcript",
        canary.transcript,
        *(["--voice-id", canary.voice_id] if canary.voice_id else []),
        "--no-report",
        "--quiet",
        "--out",
        CANARY_OUT,
        "--publish-metrics",
        environment_name,
    ]


class ProbeCanary(Construct):
    """A schedule every `[canary] every_minutes` that runs one probe task (FARGATE, awsvpc, the probe's
    subnets and group, no public IP) with `canary_command(target, ...)` as the probe container's command, and
    the role the schedule runs it with: it may start only this task definition, in this cluster, and pass
    only its two roles to ECS."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        probe: ProbeTask,
        target: Sequence[str],
        canary: CanaryConfig,
        environment_name: str,
    ) -> None:
        super().__init__(scope, construct_id)
        command = canary_command(target, canary, environment_name)
        every = Duration.minutes(canary.every_minutes)
        task_definition = probe.task_definition
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                # Only this account's schedules may assume it (the confused-deputy conditions of EventBridge
                # Scheduler User Guide, "Set up the execution role").
                conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}},
            ),
            description="sonic-deploy canary schedule: start the probe task",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="RunTheProbeTask",
                actions=["ecs:RunTask"],
                resources=[task_definition.task_definition_arn],
                conditions={"ArnEquals": {"ecs:cluster": probe.cluster.cluster_arn}},
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="PassTheProbeRoles",
                actions=["iam:PassRole"],
                resources=[probe.execution_role.role_arn, probe.task_role.role_arn],
                conditions={"StringEquals": {"iam:PassedToService": "ecs-tasks.amazonaws.com"}},
            )
        )
        self.schedule = scheduler.CfnSchedule(
            self,
            "Schedule",
            description="sonic-deploy canary: a few first-audio requests through the caller's path",
            schedule_expression=scheduler.ScheduleExpression.rate(every).expression_string,
            flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
            state="ENABLED",
            target=scheduler.CfnSchedule.TargetProperty(
                arn=probe.cluster.cluster_arn,
                role_arn=self.role.role_arn,
                ecs_parameters=scheduler.CfnSchedule.EcsParametersProperty(
                    task_definition_arn=task_definition.task_definition_arn,
                    launch_type="FARGATE",
                    task_count=1,
                    network_configuration=scheduler.CfnSchedule.NetworkConfigurationProperty(
                        awsvpc_configuration=scheduler.CfnSchedule.AwsVpcConfigurationProperty(
                            subnets=[subnet.subnet_id for subnet in probe.subnets.subnets or []],
                            security_groups=[probe.security_group.security_group_id],
                            assign_public_ip="DISABLED",
                        )
                    ),
                ),
                # The templated ECS target's input is RunTask's TaskOverride: {"containerOverrides": [{"name",
                # "command"}]} (the shape of EventBridge's ECS target, Amazon EventBridge User Guide, "Amazon ECS
                # tasks"; ECS API Reference, TaskOverride and ContainerOverride). The Scheduler API Reference
                # (Target.Input) does not spell it out for ECS: aws/aws-cdk#34129 uses this input with the
                # templated target as its workaround. UNVERIFIED against a deployed schedule: if the override is
                # not applied, the task runs the image's CMD (`probe --help`) and publishes nothing, which the
                # canary's failed-runs alarm counts as a missing run; the universal target (aws-sdk:ecs:runTask) is the fallback.
                # A token-aware JSON string: the command holds the stack's own values (URL, endpoint name).
                input=Stack.of(self).to_json_string(
                    {"containerOverrides": [{"name": CONTAINER_NAME, "command": list(command)}]}
                ),
                retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(
                    maximum_event_age_in_seconds=int(MAX_EVENT_AGE.to_seconds()),
                    maximum_retry_attempts=MAX_RETRIES,
                ),
            ),
        )
