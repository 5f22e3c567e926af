"""A customer-managed KMS key for a route's volumes, logs, alarm topic and images."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from sonic_deploy.constructs.retention import KEEP_ONCE_CREATED

# The account may administer the key (kms:PutKeyPolicy stays with IAM, so nothing locks it out) but not use
# it: use goes per service (allow_use_through) or service principal (docs/deploy.md, "The stacks' KMS keys").
ADMINISTRATION = (
    "kms:CancelKeyDeletion",
    "kms:CreateAlias",
    "kms:DeleteAlias",
    "kms:DescribeKey",
    "kms:DisableKey",
    "kms:DisableKeyRotation",
    "kms:EnableKey",
    "kms:EnableKeyRotation",
    "kms:GetKeyPolicy",
    "kms:GetKeyRotationStatus",
    "kms:ListGrants",
    "kms:ListKeyPolicies",
    "kms:ListKeyRotations",
    "kms:ListResourceTags",
    "kms:PutKeyPolicy",
    "kms:RevokeGrant",
    "kms:RotateKeyOnDemand",
    "kms:ScheduleKeyDeletion",
    "kms:TagResource",
    "kms:UntagResource",
    "kms:UpdateAlias",
    "kms:UpdateKeyDescription",
)
# What a service does with the key for a caller: data keys, and the grants ECR, EFS and SageMaker create
# (and retire) when a resource is created with it.
USE = (
    "kms:CreateGrant",
    "kms:Decrypt",
    "kms:DescribeKey",
    "kms:Encrypt",
    "kms:GenerateDataKey",
    "kms:GenerateDataKeyWithoutPlaintext",
    "kms:ReEncryptFrom",
    "kms:ReEncryptTo",
    "kms:RetireGrant",
)


class EncryptionKey(Construct):
    """One key per stack, rotated yearly, retained when the stack is deleted (data encrypted with it may
    outlive the stack: logs, snapshots, images). Its policy replaces CDK's default (the account's root with
    kms:*, which lets any IAM policy use it): the account administers it, and each service that encrypts
    something of the stack with it is named where that resource is made."""

    def __init__(self, scope: Construct, construct_id: str, *, alias: str) -> None:
        super().__init__(scope, construct_id)
        administration = iam.PolicyStatement(
            sid="AdministerNotUse",
            principals=[iam.AccountRootPrincipal()],
            actions=list(ADMINISTRATION),
            resources=["*"],
        )
        self.key = kms.Key(
            self,
            "Key",
            alias=alias,
            description="sonic-deploy: endpoint volumes, logs, alarm topic and images",
            enable_key_rotation=True,
            rotation_period=Duration.days(365),
            removal_policy=KEEP_ONCE_CREATED,
            policy=iam.PolicyDocument(statements=[administration]),
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


def allow_use_through(key: kms.IKey, service: str) -> None:
    """Let the account's principals use `key` only through `service` (`kms:ViaService`, e.g. "ecr"), as far
    as their IAM policies allow: how a resource the service keeps with this key is written and read. One
    statement per key and service; a no-op on an imported key (its policy is not the stack's)."""
    marker = f"UseThrough-{service}"
    if not isinstance(key, kms.Key) or key.node.try_find_child(marker) is not None:
        return
    Construct(key, marker)
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="UseThrough" + service.title().replace("-", ""),
            principals=[iam.AccountRootPrincipal()],
            actions=list(USE),
            resources=["*"],
            conditions={
                "StringEquals": {
                    "kms:CallerAccount": Aws.ACCOUNT_ID,
                    "kms:ViaService": f"{service}.{Aws.REGION}.amazonaws.com",
                }
            },
        )
    )


def encrypted_bucket(
    scope: Construct,
    construct_id: str,
    *,
    key: kms.IKey,
    rule_id: str,
    expiration: Duration,
    removal_policy: RemovalPolicy,
    prefix: str | None = None,
    more_rules: Sequence[s3.LifecycleRule] = (),
    auto_delete_objects: bool = False,
) -> s3.Bucket:
    """A bucket as every bucket here is made: `key` (with an S3 Bucket Key), TLS 1.2 only, no public access,
    owner-enforced objects, versioned (the compliance packs' S3BucketVersioningEnabled), and one lifecycle
    rule `rule_id` expiring objects (under `prefix`) after `expiration`, noncurrent versions and incomplete
    uploads a day later."""
    allow_use_through(key, "s3")
    return s3.Bucket(
        scope,
        construct_id,
        encryption=s3.BucketEncryption.KMS,
        encryption_key=key,
        bucket_key_enabled=True,
        enforce_ssl=True,
        minimum_tls_version=1.2,
        block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
        versioned=True,
        lifecycle_rules=[
            s3.LifecycleRule(
                id=rule_id,
                prefix=prefix,
                expiration=expiration,
                noncurrent_version_expiration=Duration.days(1),
                abort_incomplete_multipart_upload_after=Duration.days(1),
            ),
            *more_rules,
        ],
        removal_policy=removal_policy,
        auto_delete_objects=auto_delete_objects or None,
    )
