"""Persistent storage for the licence proxy in air-gapped mode: an offline licence must survive restarts."""

from __future__ import annotations

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from sonic_deploy.constructs.placement import SingleAzPlacement
from sonic_deploy.constructs.retention import KEEP_ONCE_CREATED


class LicenceStore(Construct):
    """An encrypted EFS file system in the placement's AZ, kept when the stack is deleted."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        placement: SingleAzPlacement,
        key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)
        self.file_system = efs.FileSystem(
            self,
            "FileSystem",
            vpc=vpc,
            vpc_subnets=placement.subnets,
            encrypted=True,
            kms_key=key,
            removal_policy=KEEP_ONCE_CREATED,
            performance_mode=efs.PerformanceMode.GENERAL_PURPOSE,
        )
        self.volume = ecs.Volume(
            name="licence",
            efs_volume_configuration=ecs.EfsVolumeConfiguration(
                file_system_id=self.file_system.file_system_id,
                transit_encryption="ENABLED",
                # The file system refuses anonymous clients: the task mounts with its role.
                authorization_config=ecs.AuthorizationConfig(iam="ENABLED"),
            ),
        )

    def allow(self, group: ec2.ISecurityGroup, task_role: iam.IRole) -> None:
        """NFS from the licence proxy's security group, and read/write for its task role."""
        self.file_system.connections.allow_default_port_from(group, "licence proxy")
        self.file_system.grant_read_write(task_role)
