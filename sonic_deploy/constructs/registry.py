"""ECR repositories for Cartesia's images, and their copy from Cartesia's registry at deploy time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

import cdk_ecr_deployment as ecr_deployment
from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from sonic_deploy.constructs.encryption import allow_use_through
from sonic_deploy.constructs.findings import (
    acknowledge,
    acknowledge_custom_resource_handler,
    ignore_cfn_lint_on,
    skip_checkov,
)
from sonic_deploy.constructs.naming import id_from_name
from sonic_deploy.constructs.retention import KEEP_ONCE_CREATED

KEEP_TAGGED_IMAGES = 10
# The copying Lambda's memory sets its share of CPU and network: a multi-GB worker image must arrive within
# Lambda's fixed 900 s. 3008 MB is the most a new account may give a function before a quota increase.
COPY_MEMORY_MIB = 3008
EXPIRE_UNTAGGED_AFTER = Duration.days(7)
# cdk-ecr-deployment makes one copying Lambda per stack (and memory size), at the stack's root, with this id
# prefix (its `lambdaPurpose`).
COPY_HANDLER_ID = "Custom::CDKECRDeployment"
# ... followed by the library's singleton uuid without its dashes and the memory size ("3008MiB"): one handler
# per memory size (cdk-ecr-deployment 4.2.76, lib/index.ts renderSingletonUuid).
COPY_SINGLETON_UUID = "bd07c930edb94112a20f03f096f53666"
# The copying Lambda logs in to ECR Public (ecr-public:GetAuthorizationToken, in us-east-1) for any image
# whose name contains this, with or without credentials of ours (cdk-ecr-deployment 4.2.76,
# lambda-src/utils.go NewImageOpts).
ECR_PUBLIC = "public.ecr.aws"
# What pushing into a private repository takes (Amazon ECR User Guide, "IAM permissions for pushing an image
# to an Amazon ECR private repository"), plus GetDownloadUrlForLayer, which cdk-ecr-deployment grants too:
# the copy (containers/image) may read back a layer it finds already in the repository.
PUSH_ACTIONS = [
    "ecr:BatchCheckLayerAvailability",
    "ecr:BatchGetImage",
    "ecr:CompleteLayerUpload",
    "ecr:GetDownloadUrlForLayer",
    "ecr:InitiateLayerUpload",
    "ecr:PutImage",
    "ecr:UploadLayerPart",
]


def image_repository(
    scope: Construct,
    construct_id: str,
    *,
    key: kms.IKey,
    mutability: ecr.TagMutability,
    removal_policy: RemovalPolicy,
    repository_name: str | None = None,
    empty_on_delete: bool = False,
) -> ecr.Repository:
    """A repository as every image here gets one: scan on push, the stack's KMS key, untagged layers dropped
    after EXPIRE_UNTAGGED_AFTER and the newest KEEP_TAGGED_IMAGES images kept."""
    allow_use_through(key, "ecr")
    return ecr.Repository(
        scope,
        construct_id,
        repository_name=repository_name,
        image_tag_mutability=mutability,
        image_scan_on_push=True,
        encryption=ecr.RepositoryEncryption.KMS,
        encryption_key=key,
        removal_policy=removal_policy,
        empty_on_delete=empty_on_delete or None,
        lifecycle_rules=[
            ecr.LifecycleRule(
                rule_priority=1,
                description="drop untagged layers",
                tag_status=ecr.TagStatus.UNTAGGED,
                max_image_age=EXPIRE_UNTAGGED_AFTER,
            ),
            ecr.LifecycleRule(
                rule_priority=2,
                description=f"keep the newest {KEEP_TAGGED_IMAGES} images",
                tag_status=ecr.TagStatus.ANY,
                max_image_count=KEEP_TAGGED_IMAGES,
            ),
        ],
    )


@dataclass(frozen=True)
class ImageSource:
    """Where one service's image comes from. `private`: pull with the registry credentials. `digest`: the
    image's manifest digest, which pins it: the copy pulls `source@digest` and tasks run that digest."""

    source: str
    tag: str
    repository_name: str
    private: bool = True
    digest: str | None = None

    @property
    def pull(self) -> str:
        """What the copy pulls: by digest when pinned (containers/image takes a tag or a digest, not both)."""
        return f"{self.source}@{self.digest}" if self.digest else f"{self.source}:{self.tag}"

    @property
    def reference(self) -> str:
        """How a task names the image in its repository: the digest when pinned, else the tag."""
        return self.digest or self.tag


class ImageRegistry(Construct):
    """One repository per image: immutable tags, scan on push, KMS encryption, lifecycle rules, kept when
    the stack is deleted (images are slow to copy back). With `copy_images`, a custom resource copies each
    image into its repository during the deploy, reading the registry login from Secrets Manager, with a
    role of its own that may push only into these repositories."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        images: Mapping[str, ImageSource],
        key: kms.IKey,
        registry_credentials: secretsmanager.ISecret,
        copy_images: bool,
        copy_log_retention_days: int,
        copy_memory_mib: int = COPY_MEMORY_MIB,
        reuse_repositories: bool = False,
    ) -> None:
        super().__init__(scope, construct_id)
        self.repositories: dict[str, ecr.IRepository] = {}
        self.copies: dict[str, ecr_deployment.ECRDeployment] = {}
        self.copy_role: iam.IRole | None = None
        self._references = {name: image.reference for name, image in images.items()}
        for name, image in images.items():
            construct_name = id_from_name(name)
            repository: ecr.IRepository
            if reuse_repositories:
                # Kept from an earlier deploy of this environment (they are retained): use them as they are.
                repository = ecr.Repository.from_repository_name(self, construct_name, image.repository_name)
            else:
                repository = image_repository(
                    self,
                    construct_name,
                    key=key,
                    repository_name=image.repository_name,
                    mutability=ecr.TagMutability.IMMUTABLE,
                    removal_policy=KEEP_ONCE_CREATED,
                )
            self.repositories[name] = repository

        if copy_images and images:
            self._copy(images, key, registry_credentials, copy_log_retention_days, copy_memory_mib)

    def _copy(
        self,
        images: Mapping[str, ImageSource],
        key: kms.IKey,
        secret: secretsmanager.ISecret,
        log_retention_days: int,
        memory_mib: int,
    ) -> None:
        """The copies, and the one Lambda they share. cdk-ecr-deployment adds `*` statements (every ECR
        action it might need, s3:GetObject for its S3 archive sources) to the role it is given; a role
        that refuses policy updates drops them, so the template holds only the statements below."""
        role = iam.Role(
            self,
            "CopyRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="sonic-deploy image copy: push into this stack's repositories",
        )
        self.copy_role = role
        for name, image in images.items():
            self.copies[name] = ecr_deployment.ECRDeployment(
                self,
                f"{id_from_name(name)}Copy",
                src=ecr_deployment.DockerImageName(image.pull, secret.secret_arn if image.private else None),
                dest=ecr_deployment.DockerImageName(
                    self.repositories[name].repository_uri_for_tag(image.tag)
                ),
                memory_limit=memory_mib,
                role=role.without_policy_updates(),
            )
        handler = self._copy_handler(memory_mib)
        copy_logs = keep_copy_logs(handler, key, log_retention_days)

        push = iam.ManagedPolicy(
            self,
            "CopyPolicy",
            description="sonic-deploy image copy: push into this stack's repositories, read the registry login",
            statements=self._scoped_statements(images, secret, copy_logs),
            # Attached from the policy's side: the policy names the log group, which names the Lambda,
            # which names the role.
            roles=[role],
        )
        login = iam.ManagedPolicy(
            self,
            "CopyLoginPolicy",
            description="sonic-deploy image copy: registry logins, which have no resource-level permission",
            statements=self._login_statements(images),
            roles=[role],
        )
        # The Lambda does not depend on its (managed) policies; the copies, which invoke it, do.
        for copy in self.copies.values():
            copy.node.add_dependency(push, login)
        acknowledge(
            login,
            "AwsSolutions-IAM5[Resource::*]",
            reason="registry logins only (see each statement's Sid): ecr:GetAuthorizationToken and, for "
            "public.ecr.aws sources, ecr-public:GetAuthorizationToken and sts:GetServiceBearerToken have no "
            "resource-level permission (Service Authorization Reference); pushes are scoped to this stack's "
            "repositories in CopyPolicy",
        )
        if any(ECR_PUBLIC in image.source for image in images.values()):
            skip_checkov(
                login,
                "CKV_AWS_107",
                reason="ecr-public:GetAuthorizationToken returns a pull token for ECR Public, where the "
                "public images come from; it has no resource-level permission (Service Authorization "
                "Reference). ecr:GetAuthorizationToken is checkov's own exclusion",
            )
        acknowledge_copy_handler(
            handler,
            outside_vpc="it pulls from registries on the internet (Cartesia's, public.ecr.aws), which the VPC "
            "cannot reach in air-gapped mode (no egress); outside the VPC it has the Lambda service's network, "
            "never a path into the VPC, and it only runs while CloudFormation creates or updates a copy",
        )

    def _copy_handler(self, memory_mib: int) -> lambda_.Function:
        """The copies' Lambda: one per stack and memory size (its id ends with the size; the probe image's
        copy has one of its own, probe_image.py)."""
        (handler,) = (
            child
            for child in Stack.of(self).node.children
            if child.node.id.startswith(COPY_HANDLER_ID)
            and child.node.id.endswith(f"{COPY_SINGLETON_UUID}{memory_mib}MiB")
        )
        assert isinstance(handler, lambda_.Function)
        return handler

    def _scoped_statements(
        self, images: Mapping[str, ImageSource], secret: secretsmanager.ISecret, copy_logs: logs.ILogGroup
    ) -> list[iam.PolicyStatement]:
        statements = [
            iam.PolicyStatement(
                sid="PushIntoThisStacksRepositories",
                actions=PUSH_ACTIONS,
                resources=[self.repositories[name].repository_arn for name in images],
            ),
            iam.PolicyStatement(
                sid="WriteItsOwnLogs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[copy_logs.log_group_arn],
            ),
        ]
        if any(image.private for image in images.values()):
            # A secret imported by name has a partial ARN: match its random suffix.
            statements.append(
                iam.PolicyStatement(
                    sid="ReadTheRegistryLogin",
                    actions=["secretsmanager:GetSecretValue"],
                    resources=[secret.secret_full_arn or f"{secret.secret_arn}-??????"],
                )
            )
            if secret.encryption_key is not None:
                statements.append(
                    iam.PolicyStatement(
                        sid="DecryptTheRegistryLogin",
                        actions=["kms:Decrypt"],
                        resources=[secret.encryption_key.key_arn],
                        conditions={
                            "StringEquals": {
                                "kms:ViaService": f"secretsmanager.{Stack.of(self).region}.amazonaws.com"
                            }
                        },
                    )
                )
        return statements

    @staticmethod
    def _login_statements(images: Mapping[str, ImageSource]) -> list[iam.PolicyStatement]:
        statements = [
            iam.PolicyStatement(
                sid="EcrLoginHasNoResourceLevelPermission",
                actions=["ecr:GetAuthorizationToken"],
                resources=["*"],
            )
        ]
        if any(ECR_PUBLIC in image.source for image in images.values()):
            # ECR Public's login needs both (ECR Public API Reference, GetAuthorizationToken).
            statements.append(
                iam.PolicyStatement(
                    sid="EcrPublicLoginHasNoResourceLevelPermission",
                    actions=["ecr-public:GetAuthorizationToken", "sts:GetServiceBearerToken"],
                    resources=["*"],
                )
            )
        return statements

    def before_use(self, name: str, consumer: Construct) -> None:
        """Make `consumer` (a service) wait for the copy of image `name`, so that no task starts before its
        image. The service, not its whole construct: the task roles may be in the key policy the repository
        depends on."""
        if name in self.copies:
            consumer.node.add_dependency(self.copies[name])

    def uri(self, name: str) -> str:
        """The image's reference in its repository, as a pod pulls it: `repo@sha256:...` or `repo:tag`."""
        reference, repository = self._references[name], self.repositories[name]
        if reference.startswith("sha256:"):
            return repository.repository_uri_for_digest(reference)
        return repository.repository_uri_for_tag(reference)

    def image(self, name: str) -> ecs.ContainerImage:
        """The image in its repository, by digest when config pins one (`repo@sha256:...`), else by tag."""
        return ecs.ContainerImage.from_ecr_repository(self.repositories[name], self._references[name])


def keep_copy_logs(handler: lambda_.Function, key: kms.IKey, retention_days: int) -> logs.LogGroup:
    """The copying Lambda's log group, kept, expiring and encrypted (the library sets neither)."""
    # CDK makes the function's log group with cdk.json's @aws-cdk/aws-lambda:useCdkManagedLogGroup.
    copy_logs = handler.node.try_find_child("LogGroup")
    assert isinstance(copy_logs, logs.LogGroup), "the copying Lambda has no log group: set that flag"
    copy_logs.apply_removal_policy(KEEP_ONCE_CREATED)
    copy_logs_l1 = cast(logs.CfnLogGroup, copy_logs.node.default_child)
    copy_logs_l1.retention_in_days = retention_days  # the library sets none: kept forever
    # The key policy lets CloudWatch Logs use the key for any log group of this account and Region
    # (EncryptionKey's AllowCloudWatchLogs statement).
    copy_logs_l1.kms_key_id = key.key_arn
    return copy_logs


def acknowledge_copy_handler(handler: lambda_.Function, *, outside_vpc: str) -> None:
    """What remains on a copying Lambda, and why; `outside_vpc` says why it runs outside the VPC."""
    function = handler.node.default_child
    assert isinstance(function, lambda_.CfnFunction)
    acknowledge_custom_resource_handler(handler, outside_vpc=outside_vpc)
    ignore_cfn_lint_on(
        function,
        "W3005",
        reason="cdk-ecr-deployment writes a DependsOn on the role beside the GetAtt of it: the extra edge "
        "is the library's and orders nothing differently",
    )
