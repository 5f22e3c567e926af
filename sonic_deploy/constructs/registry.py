"""ECR repositories for Cartesia's images, and their copy from Cartesia's registry at deploy time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

import cdk_ecr_deployment as ecr_deployment
from aws_cdk import Duration, Stack
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from sonic_deploy.constructs.findings import acknowledge
from sonic_deploy.constructs.naming import id_from_name
from sonic_deploy.constructs.retention import KEEP_ONCE_CREATED

KEEP_TAGGED_IMAGES = 10
# The copying Lambda's memory sets its share of CPU and network: a multi-GB worker image must arrive within
# Lambda's fixed 900 s. 3008 MB is the most a new account may give a function before a quota increase.
COPY_MEMORY_MIB = 3008
EXPIRE_UNTAGGED_AFTER = Duration.days(7)


@dataclass(frozen=True)
class ImageSource:
    """Where one service's image comes from. `private`: pull with the registry credentials."""

    source: str
    tag: str
    repository_name: str
    private: bool = True


class ImageRegistry(Construct):
    """One repository per image: immutable tags, scan on push, KMS encryption, lifecycle rules, kept when
    the stack is deleted (images are slow to copy back). With `copy_images`, a custom resource copies each
    `source:tag` into its repository during the deploy, reading the registry login from Secrets Manager."""

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
        self._tags = {name: image.tag for name, image in images.items()}
        for name, image in images.items():
            construct_name = id_from_name(name)
            repository: ecr.IRepository
            if reuse_repositories:
                # Kept from an earlier deploy of this environment (they are retained): use them as they are.
                repository = ecr.Repository.from_repository_name(self, construct_name, image.repository_name)
            else:
                repository = ecr.Repository(
                    self,
                    construct_name,
                    repository_name=image.repository_name,
                    image_tag_mutability=ecr.TagMutability.IMMUTABLE,
                    image_scan_on_push=True,
                    encryption=ecr.RepositoryEncryption.KMS,
                    encryption_key=key,
                    removal_policy=KEEP_ONCE_CREATED,
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
            self.repositories[name] = repository
            if copy_images:
                self.copies[name] = ecr_deployment.ECRDeployment(
                    self,
                    f"{construct_name}Copy",
                    src=ecr_deployment.DockerImageName(
                        f"{image.source}:{image.tag}",
                        registry_credentials.secret_arn if image.private else None,
                    ),
                    dest=ecr_deployment.DockerImageName(repository.repository_uri_for_tag(image.tag)),
                    memory_limit=copy_memory_mib,
                )

        if self.copies:
            self._allow_reading_credentials(next(iter(self.copies.values())), registry_credentials)
        # cdk-ecr-deployment puts one copying Lambda per stack at the stack's root.
        for child in Stack.of(self).node.children:
            if child.node.id.startswith("Custom::CDKECRDeployment"):
                copy_logs = child.node.try_find_child("LogGroup")
                if isinstance(copy_logs, logs.LogGroup):
                    copy_logs.apply_removal_policy(KEEP_ONCE_CREATED)
                    # The library makes this group without a retention: logs kept forever.
                    cast(
                        logs.CfnLogGroup, copy_logs.node.default_child
                    ).retention_in_days = copy_log_retention_days
                acknowledge(
                    child,
                    "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
                    "AWSLambdaBasicExecutionRole]",
                    "AwsSolutions-IAM5[Resource::*]",
                    reason="cdk-ecr-deployment's copying Lambda: it logs, and reads any source registry",
                )

    @staticmethod
    def _allow_reading_credentials(
        copy: ecr_deployment.ECRDeployment, secret: secretsmanager.ISecret
    ) -> None:
        """The copying Lambda (one role for every copy) reads the registry login; cdk-ecr-deployment grants
        only ECR and S3 itself. A secret imported by name has a partial ARN: match its random suffix."""
        copy.add_to_principal_policy(
            iam.PolicyStatement(
                actions=["secretsmanager:GetSecretValue"],
                resources=[secret.secret_full_arn or f"{secret.secret_arn}-??????"],
            )
        )
        if secret.encryption_key is not None:
            copy.add_to_principal_policy(
                iam.PolicyStatement(actions=["kms:Decrypt"], resources=[secret.encryption_key.key_arn])
            )

    def before_use(self, name: str, consumer: Construct) -> None:
        """Make `consumer` (a service) wait for the copy of image `name`, so that no task starts before its
        image. The service, not its whole construct: the task roles may be in the key policy the repository
        depends on."""
        if name in self.copies:
            consumer.node.add_dependency(self.copies[name])

    def image(self, name: str) -> ecs.ContainerImage:
        return ecs.ContainerImage.from_ecr_repository(self.repositories[name], self._tags[name])
