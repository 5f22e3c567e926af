"""The first-audio canary: an EventBridge Scheduler schedule that starts the probe task every few minutes, a
few short requests through the caller's path, publishing TTFA and success as CloudWatch metrics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Aws, Duration, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_scheduler as scheduler
from constructs import Construct

from sonic_deploy.config import Settings
from sonic_deploy.config.schema import CanaryConfig
from sonic_deploy.constructs.findings import acknowledge_compliance
from sonic_deploy.constructs.probe_task import CONTAINER_NAME, ProbeTask

CANARY_OUT = "/tmp/canary"  # the task's writable volume (probe_task.py)
# A run that cannot start is not retried: the next one is a few minutes away, and a late run would measure a
# different minute than the one it is published under. Scheduler's least event age is 60 s ("RetryPolicy":
# MaximumEventAgeInSeconds 60-86400, MaximumRetryAttempts 0-185; EventBridge Scheduler API Reference), against
# its default of 24 hours and 185 retries.
MAX_EVENT_AGE = Duration.seconds(60)
MAX_RETRIES = 0
STARTED_BY = "sonic-deploy-canary"  # RunTask's startedBy: the canary's tasks in ListTasks/DescribeTasks
# Scheduler's universal target for ECS RunTask ("Using universal targets", EventBridge Scheduler User Guide:
# Arn arn:aws:scheduler:::aws-sdk:<service>:<apiAction>, Input the JSON request of that API). Not the
# templated ECS target: the Scheduler API Reference defines Target.Input only for Lambda, Step Functions and
# EventBridge targets, and CDK's EcsRunTask has no overrides (aws/aws-cdk#34129), so the command override
# could be dropped and every run would be the image's CMD (`probe --help`), exiting 0.
RUN_TASK_TARGET = f"arn:{Aws.PARTITION}:scheduler:::aws-sdk:ecs:runTask"
# AWS/Scheduler's metrics of a failed start, by schedule group (the only dimension: "Monitoring Amazon
# EventBridge Scheduler with Amazon CloudWatch", EventBridge Scheduler User Guide): the target (RunTask)
# answered an error, or the invocation was dropped when its retry policy ran out (here: at once).
FAILED_START_METRICS = ("TargetErrorCount", "InvocationDroppedCount")
SCHEDULER_NAMESPACE = "AWS/Scheduler"


def sdk_input(request: Any) -> Any:
    """A request in the API model's member names (botocore's: `taskDefinition`, `awsvpcConfiguration`) as a
    universal target's Input takes it: every key with a capital first letter (`TaskDefinition`,
    `AwsvpcConfiguration`), values as they are. The Scheduler docs do not spell the case out; the public
    configurations of this target write PascalCase, and one records CreateSchedule refusing camelCase
    ("missing field TaskDefinition"). UNVERIFIED here against a deployed schedule."""
    if isinstance(request, dict):
        return {key[:1].upper() + key[1:]: sdk_input(value) for key, value in request.items()}
    if isinstance(request, list):
        return [sdk_input(item) for item in request]
    return request


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
    """A schedule every `[canary] every_minutes`, in a schedule group of its own, that calls ECS RunTask
    (Scheduler's universal target) for one probe task (FARGATE, awsvpc, the probe's subnets and group, no
    public IP) with `canary_command(target, ...)` as the probe container's command, and the role the schedule
    runs it with: only this stack's canary schedules may assume it, and it may start only this task
    definition, in this cluster, and pass only its two roles to ECS. `failed_starts()` is the metric of runs
    that did not start (the alarm on it is the caller's)."""

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
        self.every = Duration.minutes(canary.every_minutes)
        task_definition = probe.task_definition
        # A group of its own: Scheduler's metrics have no per-schedule dimension, only ScheduleGroup, and the
        # other stack's canary (same account and Region) would share the default group's. The name is
        # CloudFormation's (unique in the account and Region); Ref is the name.
        self.group = scheduler.CfnScheduleGroup(self, "Group")
        schedules = Stack.of(self).format_arn(
            service="scheduler", resource="schedule", resource_name=f"{self.group.ref}/*"
        )
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                # Only this account's schedules, of this canary's group, may assume it (the confused-deputy
                # conditions of EventBridge Scheduler User Guide, "Set up the execution role").
                conditions={
                    "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    "ArnLike": {"aws:SourceArn": schedules},
                },
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
        acknowledge_compliance(
            self.role,
            "IAMNoInlinePolicy",
            reason="the canary schedule's role may only run the probe task in its cluster and pass its two "
            "roles to ECS, in an inline policy that lives and goes with the role",
        )
        # RunTask's request in the ECS API's member names (ECS API Reference, RunTask; the tests validate it
        # against botocore's model), sent as sdk_input(...).
        run_task = {
            "cluster": probe.cluster.cluster_arn,
            "taskDefinition": task_definition.task_definition_arn,
            "launchType": "FARGATE",
            "count": 1,
            "startedBy": STARTED_BY,
            "networkConfiguration": {
                "awsvpcConfiguration": {
                    "subnets": [subnet.subnet_id for subnet in probe.subnets.subnets or []],
                    "securityGroups": [probe.security_group.security_group_id],
                    "assignPublicIp": "DISABLED",
                }
            },
            "overrides": {"containerOverrides": [{"name": CONTAINER_NAME, "command": list(command)}]},
        }
        self.schedule = scheduler.CfnSchedule(
            self,
            "Schedule",
            description="sonic-deploy canary: a few first-audio requests through the caller's path",
            group_name=self.group.ref,
            schedule_expression=scheduler.ScheduleExpression.rate(self.every).expression_string,
            flexible_time_window=scheduler.CfnSchedule.FlexibleTimeWindowProperty(mode="OFF"),
            state="ENABLED",
            target=scheduler.CfnSchedule.TargetProperty(
                arn=RUN_TASK_TARGET,
                role_arn=self.role.role_arn,
                # A token-aware JSON string: the request holds the stack's own values (ARNs, URL, endpoint).
                input=Stack.of(self).to_json_string(sdk_input(run_task)),
                retry_policy=scheduler.CfnSchedule.RetryPolicyProperty(
                    maximum_event_age_in_seconds=int(MAX_EVENT_AGE.to_seconds()),
                    maximum_retry_attempts=MAX_RETRIES,
                ),
            ),
        )

    def metric(self, metric_name: str) -> cloudwatch.Metric:
        """One of AWS/Scheduler's metrics of this canary's group (FAILED_START_METRICS), summed over a run's
        interval."""
        return cloudwatch.Metric(
            namespace=SCHEDULER_NAMESPACE,
            metric_name=metric_name,
            dimensions_map={"ScheduleGroup": self.group.ref},
            statistic=cloudwatch.Stats.SUM,
            period=self.every,
        )

    def failed_starts(self) -> cloudwatch.MathExpression:
        """Canary runs that did not start, per run interval: RunTask errors (no capacity, a bad request, a
        denied role) and dropped invocations; 0 where Scheduler published nothing."""
        names = dict(zip(("errors", "dropped"), FAILED_START_METRICS, strict=True))
        return cloudwatch.MathExpression(
            expression=" + ".join(f"FILL({key}, 0)" for key in names),
            using_metrics={key: self.metric(name) for key, name in names.items()},
            label="Canary runs that did not start",
            period=self.every,
        )


def canary_for(
    scope: Construct, probe: ProbeTask, target: Sequence[str], settings: Settings
) -> ProbeCanary | None:
    """The environment's canary for `probe` calling `target` (`probe ws --url ...`, `probe sagemaker ...`), or
    None when `[canary]` is off."""
    if not settings.canary_enabled:
        return None
    env = settings.environment
    return ProbeCanary(
        scope,
        "Canary",
        probe=probe,
        target=target,
        canary=env.canary,
        environment_name=settings.environment_name,
    )
