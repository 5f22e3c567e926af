"""Why GPU capacity is short, as AWS says it: the GPU groups' failed launches and the worker services' failed
task placements, caught by two EventBridge rules into one encrypted log group, counted, and alarmed on.

WorkerTasksWaiting (operations.py) sees that a worker task waits; this says why. EC2 Auto Scaling sends
"EC2 Instance Launch Unsuccessful" with a `detail.StatusMessage` (Amazon EC2 Auto Scaling User Guide, "Amazon
EC2 Auto Scaling event reference", "Unsuccessful scaling events": the example has "message-text"; that it
carries EC2's error, as a scaling activity's StatusMessage does, is UNVERIFIED); ECS sends "ECS Service
Action" SERVICE_TASK_PLACEMENT_FAILURE with "the cause ... described in the `reason` field" (Amazon ECS
Developer Guide, "Amazon ECS service action events"). Both are delivered on a best-effort basis (EventBridge
Events Reference, "Amazon EC2 Auto Scaling events": "Delivery type: Best effort").

Delivery to the log group: EventBridge writes to CloudWatch Logs under a CloudWatch Logs resource policy, not a
role (EventBridge User Guide, "Using resource-based policies for Amazon EventBridge", "CloudWatch Logs
permissions": "do not specify a RoleArn"). CDK's `targets.CloudWatchLogGroup` makes that policy with an
AwsCustomResource, a Lambda function calling PutResourcePolicy, one policy per rule (aws-cdk-lib 2.275
aws-events-targets/lib/log-group.js and log-group-resource-policy.js; `install_latest_aws_sdk` only chooses
that Lambda's SDK, it does not remove it). Here the target is our own IRuleTarget (`_LogGroupTarget`), which
makes nothing, and one native AWS::Logs::ResourcePolicy covers both rules: no Lambda, no custom resource, one of
the account's 10 resource policies per Region (CloudWatch Logs API Reference, PutResourcePolicy) instead of two.
"""

from __future__ import annotations

from collections.abc import Sequence

import jsii
from aws_cdk import ArnFormat, Aws, Duration, Stack
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk.interfaces import aws_events as events_refs
from constructs import Construct

from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.constructs.naming import physical_name
from sonic_deploy.constructs.retention import KEEP_ONCE_CREATED

FIVE_MINUTES = Duration.minutes(5)
LAUNCH_FAILED = "EC2 Instance Launch Unsuccessful"
SERVICE_ACTION = "ECS Service Action"
PLACEMENT_FAILED = "SERVICE_TASK_PLACEMENT_FAILURE"
# The dashboard's log widget, named in the alarm's description and the docs.
WIDGET_TITLE = "Why GPU capacity is short"
# Logs Insights discovers the JSON fields of each event (a dotted path per nested field): the ASG's reason
# and ECS's. UNVERIFIED here: the field names as Logs Insights shows them for events EventBridge writes.
QUERY_FIELDS = ("@timestamp", "detail.StatusMessage", "detail.reason")
QUERY_LIMIT = 20
# One failed launch opens the alarm; it closes after this many five-minute periods with none. EC2 Auto
# Scaling retries a failed launch on its own, minutes apart (UNVERIFIED: the interval is not documented): with
# a one-period window the alarm, CapacityAtRisk and Page would go back to OK between retries and page again at
# the next one.
QUIET_PERIODS = 3


@jsii.implements(events.IRuleTarget)
class _LogGroupTarget:
    """A rule target that only names the log group; the resource policy that lets EventBridge write to it
    is CapacityEvents' own (the module's docstring)."""

    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._log_group = log_group

    def bind(self, rule: events_refs.IRuleRef, id: str | None = None) -> events.RuleTargetConfig:
        # A target's ARN is the log group's without the ":*" that CloudFormation's Arn attribute ends in,
        # as CDK's own log group target writes it (log-group.js, formatArn COLON_RESOURCE_NAME).
        arn = Stack.of(self._log_group).format_arn(
            service="logs",
            resource="log-group",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
            resource_name=self._log_group.log_group_name,
        )
        return events.RuleTargetConfig(arn=arn)


class CapacityEvents(Construct):
    """Two rules (`launch_failures`, `placement_failures`) into `log_group`, their matched events as metrics,
    and the GpuLaunchesFailing alarm (`launches_failing`)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        groups: Sequence[autoscaling.IAutoScalingGroup],
        services: Sequence[ecs.IService],
        key: kms.IKey,
        log_retention: logs.RetentionDays,
        alerting: Alerting,
    ) -> None:
        """`groups`: every GPU Auto Scaling group; `services`: the GPU worker services (an ecs.BaseService
        is one; any IService, so that imported ones can be named too)."""
        super().__init__(scope, construct_id)
        if not groups or not services:
            raise ValueError("CapacityEvents needs at least one GPU group and one worker service")
        # Encrypted with the stack's key, whose policy lets CloudWatch Logs use it for this account's log
        # groups (EncryptionKey). EventBridge does not encrypt: CloudWatch Logs does, on PutLogEvents, so the
        # key policy names no EventBridge principal. UNVERIFIED: that EventBridge's writes to a KMS-encrypted
        # group succeed with this policy alone; a failure shows as the rule's AWS/Events FailedInvocations,
        # which the dashboard graphs next to the matched events.
        self.log_group = logs.LogGroup(
            self, "Logs", encryption_key=key, retention=log_retention, removal_policy=KEEP_ONCE_CREATED
        )
        target = _LogGroupTarget(self.log_group)
        self.launch_failures = events.Rule(
            self,
            "LaunchFailures",
            description="The GPU groups' failed instance launches, with EC2's reason, into the capacity log",
            event_pattern=events.EventPattern(
                source=["aws.autoscaling"],
                detail_type=[LAUNCH_FAILED],
                detail={"AutoScalingGroupName": [group.auto_scaling_group_name for group in groups]},
            ),
            targets=[target],
        )
        self.placement_failures = events.Rule(
            self,
            "PlacementFailures",
            description="The GPU worker services' failed task placements, with ECS's reason, into the capacity log",
            event_pattern=events.EventPattern(
                source=["aws.ecs"],
                detail_type=[SERVICE_ACTION],
                detail={"eventName": [PLACEMENT_FAILED]},
                resources=[service.service_arn for service in services],
            ),
            targets=[target],
        )
        rules = [self.launch_failures, self.placement_failures]
        # The EventBridge User Guide's example grants events.amazonaws.com these two actions; CloudWatch Logs
        # supports aws:SourceArn and aws:SourceAccount (API Reference, PutResourcePolicy). Both statements:
        # this log group only (its Arn ends in ":*", its streams).
        principal = iam.ServicePrincipal("events.amazonaws.com")
        self.resource_policy = logs.ResourcePolicy(
            self,
            "EventsWriteHere",
            # Account-level: one of the Region's 10 (docs/deploy.md); the stack's name keeps environments apart.
            resource_policy_name=physical_name(self, "capacity-events"),
            policy_statements=[
                # No condition: EventBridge's CreateLogStream does not carry the rule's ARN, so a SourceArn
                # condition refuses it and the log stays empty (aws-samples/serverless-patterns#618 split
                # its policy for this). Whether it carries aws:SourceAccount is not documented either.
                iam.PolicyStatement(
                    sid="EventBridgeCreatesTheCapacityLogStreams",
                    principals=[principal],
                    actions=["logs:CreateLogStream"],
                    resources=[self.log_group.log_group_arn],
                ),
                iam.PolicyStatement(
                    sid="TheCapacityRulesWriteTheCapacityLog",
                    principals=[principal],
                    actions=["logs:PutLogEvents"],
                    resources=[self.log_group.log_group_arn],
                    conditions={
                        "ArnEquals": {"aws:SourceArn": [rule.rule_arn for rule in rules]},
                        "StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID},
                    },
                ),
            ],
        )
        # The policy names the rules' ARNs, so CloudFormation makes it after them: an event in the seconds
        # between is not written (and counts in FailedInvocations); the capacity log starts a deploy late, no more.

        self.launches_failing = alerting.alarm(
            "GpuLaunchesFailing",
            metric=self.launches_failed(),
            threshold=1,
            evaluation_periods=QUIET_PERIODS,
            datapoints_to_alarm=1,
            description="EC2 Auto Scaling could not launch a GPU instance in the last "
            f"{QUIET_PERIODS * 5} minutes. Likely causes: InsufficientInstanceCapacity (no capacity for the type "
            "in the AZ), the 'Running On-Demand G and VT instances' vCPU quota (VcpuLimitExceeded), a "
            f"capacity reservation that is full. EC2's own reason: the dashboard's '{WIDGET_TITLE}' widget.",
        )

    def launches_failed(self) -> cloudwatch.Metric:
        """Failed GPU launches per five minutes (the launch rule's MatchedEvents)."""
        return _matched(self.launch_failures, "failed GPU launches")

    def placements_failed(self) -> cloudwatch.Metric:
        """Failed worker task placements per five minutes (the placement rule's MatchedEvents)."""
        return _matched(self.placement_failures, "failed task placements")

    def deliveries_failed(self) -> list[cloudwatch.Metric]:
        """Events either rule could not write to the log group (FailedInvocations, sent only when not zero;
        EventBridge User Guide, "Monitoring Amazon EventBridge")."""
        return [
            _rule_metric(rule, "FailedInvocations", f"not logged ({rule.node.id})")
            for rule in (self.launch_failures, self.placement_failures)
        ]


def _matched(rule: events.Rule, label: str) -> cloudwatch.Metric:
    return _rule_metric(rule, "MatchedEvents", label)


def _rule_metric(rule: events.Rule, name: str, label: str) -> cloudwatch.Metric:
    # "Metrics that specify only the RuleName dimension refer to the default event bus" (EventBridge User
    # Guide, "Monitoring Amazon EventBridge"): both rules are on the default bus.
    return cloudwatch.Metric(
        namespace="AWS/Events",
        metric_name=name,
        statistic="Sum",
        period=FIVE_MINUTES,
        dimensions_map={"RuleName": rule.rule_name},
        label=label,
    )
