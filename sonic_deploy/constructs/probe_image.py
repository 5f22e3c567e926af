"""The probe's container image: built from this repository by `cdk deploy`, copied into a repository of the
stack's own, so that probe tasks pull only from the stack's ECR (through the VPC's endpoints)."""

from __future__ import annotations

from pathlib import Path

import cdk_ecr_deployment as ecr_deployment
from aws_cdk import IgnoreMode, RemovalPolicy, Stack
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from sonic_deploy.constructs.findings import acknowledge, acknowledge_compliance, skip_checkov
from sonic_deploy.constructs.registry import (
    COPY_HANDLER_ID,
    COPY_SINGLETON_UUID,
    PUSH_ACTIONS,
    acknowledge_copy_handler,
    image_repository,
    keep_copy_logs,
)

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = "docker/probe/Dockerfile"
# The build context: what `pip install .[probe]` reads, and the Dockerfile; nothing else is staged into the
# cloud assembly or hashed at synth (.venv, node_modules, cdk.out, tests and .git are never walked: CDK's
# Docker ignore strategy skips a directory that no `!` pattern reaches into). Compiled bytecode differs from
# host to host and would change the asset hash with no change of source.
CONTEXT = [
    "*",
    "!pyproject.toml",
    "!README.md",
    "!sonic_deploy",
    f"!{DOCKERFILE}",
    "**/__pycache__",
    "**/*.pyc",
]
# The probe image is a few hundred MB, not a multi-GB worker image: 1 GB copies it well within Lambda's 900 s.
# A memory size of its own also gives the copy a Lambda of its own (cdk-ecr-deployment makes one per memory
# size), with a role that may pull only this asset and push only into this repository.
COPY_MEMORY_MIB = 1024
# The permissions to pull an image (Amazon ECR User Guide, "Private repository policies", pull actions).
PULL_ACTIONS = ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"]


class ProbeImage(Construct):
    """The probe image as a Docker image asset (staged at synth, offline and without Docker; built and pushed
    to the bootstrap's asset repository by `cdk deploy`, so Docker must be on the deploying host), and a
    repository of this stack's (mutable tags, scan on push, the stack's KMS key, lifecycle rules) that a
    cdk-ecr-deployment copy fills from the asset during the deploy, tagged with the asset's hash.

    The repository goes with the stack (its images with it, EmptyOnDelete): every deploy rebuilds the image
    from the code it deploys, so nothing in it is worth keeping, and a retained one would be left behind by
    every deletion of the stack."""

    def __init__(
        self, scope: Construct, construct_id: str, *, key: kms.IKey, copy_log_retention_days: int
    ) -> None:
        super().__init__(scope, construct_id)
        self.asset = ecr_assets.DockerImageAsset(
            self,
            "Asset",
            directory=str(REPOSITORY_ROOT),
            file=DOCKERFILE,
            exclude=CONTEXT,
            ignore_mode=IgnoreMode.DOCKER,
            platform=ecr_assets.Platform.LINUX_AMD64,
        )
        self.repository = image_repository(
            self,
            "Repository",
            key=key,
            # Mutable: cdk-ecr-deployment's push into an immutable repository fails when the tag exists
            # (cdklabs/cdk-ecr-deployment#207, open; aws/containers-roadmap#2380), and a rolled-back deploy
            # that changed the code copies the previous tag again, which exists: the rollback fails and the
            # stack is left UPDATE_ROLLBACK_FAILED. The tag is the hash of the image's sources, so an
            # overwrite writes the same image.
            mutability=ecr.TagMutability.MUTABLE,
            removal_policy=RemovalPolicy.DESTROY,
            empty_on_delete=True,
        )
        skip_checkov(
            self.repository,
            "CKV_AWS_51",
            reason="mutable tags: the deploy's copy (cdk-ecr-deployment) fails to push an existing tag into an "
            "immutable repository (cdklabs/cdk-ecr-deployment#207), which fails a rollback; each tag is the "
            "hash of the image's sources and only the deploy's copy may push (CopyPolicy), so a tag is only "
            "ever rewritten with the same image",
        )
        # The asset's hash is its tag in both repositories: a new tag for every change of the image's sources.
        self.tag = self.asset.image_tag
        role = iam.Role(
            self,
            "CopyRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="sonic-deploy probe image copy: pull the built asset, push into the probe repository",
        )
        self.copy = ecr_deployment.ECRDeployment(
            self,
            "Copy",
            src=ecr_deployment.DockerImageName(self.asset.image_uri),
            dest=ecr_deployment.DockerImageName(self.repository.repository_uri_for_tag(self.tag)),
            memory_limit=COPY_MEMORY_MIB,
            # The library's own statements (every ECR action, s3:GetObject, on `*`) are dropped: only ours.
            role=role.without_policy_updates(),
        )
        handler = self._handler(role)
        copy_logs = keep_copy_logs(handler, key, copy_log_retention_days)
        policy = iam.Policy(
            self,
            "CopyPolicy",
            statements=[
                iam.PolicyStatement(
                    sid="PullTheBuiltAsset",
                    actions=PULL_ACTIONS,
                    resources=[self.asset.repository.repository_arn],
                ),
                iam.PolicyStatement(
                    sid="PushIntoTheProbeRepository",
                    actions=PUSH_ACTIONS,
                    resources=[self.repository.repository_arn],
                ),
                iam.PolicyStatement(
                    sid="WriteItsOwnLogs",
                    actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                    resources=[copy_logs.log_group_arn],
                ),
                iam.PolicyStatement(
                    sid="EcrLoginHasNoResourceLevelPermission",
                    actions=["ecr:GetAuthorizationToken"],
                    resources=["*"],
                ),
            ],
            roles=[role],
        )
        self.copy.node.add_dependency(policy)
        acknowledge_compliance(
            policy,
            "IAMNoInlinePolicy",
            reason="the probe image copy's own statements (pull the built asset, push into the probe repository, "
            "its log group), attached to its one role, which the library's defaults are kept off",
        )
        acknowledge(
            policy,
            "AwsSolutions-IAM5[Resource::*]",
            reason="EcrLoginHasNoResourceLevelPermission: ecr:GetAuthorizationToken has no resource-level "
            "permission (Service Authorization Reference); pulls and pushes are on the two repositories only",
        )
        acknowledge_copy_handler(
            handler,
            outside_vpc="it copies between two repositories of this account's ECR (the bootstrap's asset "
            "repository, the probe repository) during the deploy, before any task runs, and needs nothing in "
            "the VPC; outside it, it has the Lambda service's network, never a path into the VPC",
        )

    def _handler(self, role: iam.IRole) -> lambda_.Function:
        """The copy's Lambda, at the stack's root (one per memory size): it must be ours, with our role, not
        another copy's of the same memory size."""
        (handler,) = (
            child
            for child in Stack.of(self).node.children
            if child.node.id.startswith(COPY_HANDLER_ID)
            and child.node.id.endswith(f"{COPY_SINGLETON_UUID}{COPY_MEMORY_MIB}MiB")
        )
        assert isinstance(handler, lambda_.Function)
        if handler.role is None or handler.role.role_arn != role.role_arn:
            raise ValueError(
                f"ecs.image_copy_memory_mib = {COPY_MEMORY_MIB} is the probe image copy's: choose another value"
            )
        return handler

    def image(self) -> ecs.ContainerImage:
        return ecs.ContainerImage.from_ecr_repository(self.repository, self.tag)

    def before_use(self, consumer: Construct) -> None:
        """Make `consumer` (the task definition) wait for the copy, so that no task is started with an image
        that is not there yet."""
        consumer.node.add_dependency(self.copy)
