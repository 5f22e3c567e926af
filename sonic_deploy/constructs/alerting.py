"""An encrypted SNS topic for alarms, optional e-mail subscribers, and alarms that notify it."""

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


class Alerting(Construct):
    """Every alarm of a route goes to one topic; alarm and recovery both notify, so on-call sees the end."""

    def __init__(
        self, scope: Construct, construct_id: str, *, key: kms.IKey, emails: Sequence[str] = ()
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(self, "Topic", master_key=key, enforce_ssl=True)
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
        action = cw_actions.SnsAction(self.topic)
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
        self.alarms.append(alarm)
        return alarm
