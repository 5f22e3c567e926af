"""A customer-managed KMS key for a route's volumes, logs, alarm topic and images."""

from __future__ import annotations

from aws_cdk import Aws, Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from sonic_deploy.constructs.retention import KEEP_ONCE_CREATED


class EncryptionKey(Construct):
    """One key per stack, rotated yearly, retained when the stack is deleted (data encrypted with it may
    outlive the stack: logs, snapshots, images)."""

    def __init__(self, scope: Construct, construct_id: str, *, alias: str) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "Key",
            alias=alias,
            description="sonic-deploy: endpoint volumes, logs, alarm topic and images",
            enable_key_rotation=True,
            rotation_period=Duration.days(365),
            removal_policy=KEEP_ONCE_CREATED,
        )
        # CloudWatch Logs encrypts a log group with this key only if the key policy lets the Regional
        # logs service use it for log groups of this account.
        self.key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchLogs",
                principals=[iam.ServicePrincipal(f"logs.{Aws.REGION}.amazonaws.com")],
                actions=[
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                resources=["*"],
                conditions={
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": f"arn:{Aws.PARTITION}:logs:{Aws.REGION}:{Aws.ACCOUNT_ID}:log-group:*"
                    }
                },
            )
        )
