"""An encrypted SNS topic for alarms, optional e-mail subscribers, the route's alarms, the composite alarms that
group them, and the one composite that notifies the topic."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws, Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from sonic_deploy.constructs.encryption import allow_use_through
from sonic_deploy.constructs.findings import acknowledge_compliance
from sonic_deploy.constructs.naming import physical_name


class Alerting(Construct):
    """One topic per route, notified by one composite alarm only (`page`), on alarm and on recovery (so on-call
    sees the end). The single alarms (`alarm`) and the composites that group them (`composite`) have no
    actions: a single alarm stays usable as an ECS deployment alarm or an FIS stop condition, which read its
    state, not its actions."""

    def __init__(
        self, scope: Construct, construct_id: str, *, key: kms.IKey, emails: Sequence[str] = ()
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(self, "Topic", master_key=key, enforce_ssl=True)
        allow_use_through(key, "sns")  # a publisher the account allows, e.g. on-call testing the page
        for address in emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(address))
        # The topic policy (made for enforce_ssl) replaces SNS's default one: let this account's alarms
        # publish, and use the key to encrypt what they publish.
        account = Stack.of(self).account
        alarms = iam.ServicePrincipal("cloudwatch.amazonaws.com")
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowThisAccountsAlarms",
                principals=[alarms],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": account},
                    "ArnLike": {
                        "aws:SourceArn": f"arn:{Aws.PARTITION}:cloudwatch:{Aws.REGION}:{account}:alarm:*"
                    },
                },
            )
        )
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowThisAccountsAlarmsToEncrypt",
                principals=[alarms],
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": account}},
            )
        )
        self.alarms: list[cloudwatch.Alarm] = []
        self.composites: list[cloudwatch.CompositeAlarm] = []

    def alarm(
        self,
        construct_id: str,
        *,
        metric: cloudwatch.IMetric,
        threshold: float,
        description: str,
        evaluation_periods: int = 1,
        datapoints_to_alarm: int | None = None,
        comparison: cloudwatch.ComparisonOperator = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        missing_data: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
    ) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self,
            construct_id,
            metric=metric,
            threshold=threshold,
            evaluation_periods=evaluation_periods,
            datapoints_to_alarm=datapoints_to_alarm,
            comparison_operator=comparison,
            treat_missing_data=missing_data,
            alarm_description=description,
        )
        acknowledge_compliance(
            alarm,
            "CloudWatchAlarmAction",
            reason="a child of the route's composite alarms, which notify the alarm topic (Alerting.composite): "
            "one incident pages once; deployment alarms and FIS stop conditions read its state",
        )
        self.alarms.append(alarm)
        return alarm

    def composite(
        self, construct_id: str, *, alarms: Sequence[cloudwatch.IAlarm], description: str
    ) -> cloudwatch.CompositeAlarm:
        """In ALARM while any of `alarms` is; no actions of its own (it names a kind of incident for `page`)."""
        if not alarms:
            raise ValueError(f"composite alarm {construct_id} needs at least one alarm")
        composite = cloudwatch.CompositeAlarm(
            self,
            construct_id,
            composite_alarm_name=physical_name(self, construct_id),
            alarm_rule=cloudwatch.AlarmRule.any_of(*alarms),
            alarm_description=description,
        )
        acknowledge_compliance(
            composite,
            "CloudWatchAlarmAction",
            reason="a child of the route's Page composite, which notifies the alarm topic (Alerting.page): "
            "one incident pages once",
        )
        self.composites.append(composite)
        return composite

    def page(
        self, construct_id: str, *, alarms: Sequence[cloudwatch.IAlarm], description: str
    ) -> cloudwatch.CompositeAlarm:
        """The one alarm that notifies the topic: in ALARM while any of `alarms` (the group composites) is,
        notifying when it goes in and when it comes back to OK. While it is in ALARM, a further child going
        into ALARM notifies no one: AlarmActions are "the actions to execute when this alarm transitions to the
        ALARM state from any other state", and a rule "can include metric alarms and other composite alarms"
        (CloudWatch API Reference, PutCompositeAlarm)."""
        if not alarms:
            raise ValueError(f"composite alarm {construct_id} needs at least one alarm")
        composite = cloudwatch.CompositeAlarm(
            self,
            construct_id,
            composite_alarm_name=physical_name(self, construct_id),
            alarm_rule=cloudwatch.AlarmRule.any_of(*alarms),
            alarm_description=description,
        )
        action = cw_actions.SnsAction(self.topic)
        composite.add_alarm_action(action)
        composite.add_ok_action(action)
        self.composites.append(composite)
        return composite
