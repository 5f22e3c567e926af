"""The offline licence of air-gapped mode: where the operator puts it, how it reaches the licence proxy, and
where the proxy keeps it across restarts."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_efs as efs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from sonic_deploy.constructs.encryption import allow_use_through
from sonic_deploy.constructs.findings import acknowledge_compliance
from sonic_deploy.constructs.placement import SingleAzPlacement
from sonic_deploy.constructs.retention import KEEP_ONCE_CREATED
from sonic_deploy.routes.ecs.constructs.sonic_metrics import SONIC_NAMESPACE
from sonic_deploy.routes.ecs.constructs.sonic_service import SonicService
from sonic_deploy.routes.licence_loader import LOADER_GAVE_UP, loader_script


class LicenceStore(Construct):
    """An encrypted EFS file system in the placement's AZ where the proxy keeps its licence, and the secret
    the operator writes the licence into (`sonic-deploy licence upload`), imported by name.

    Nothing can reach the proxy from outside in air-gapped mode (no egress, no bastion, ingress only from the
    API server and workers), so the licence goes the way the tasks' other secrets go: ECS reads the secret
    through the Secrets Manager endpoint when the task starts, and a loader container in the proxy's own task
    POSTs it to the proxy on localhost (`load_into`). The secret is the operator's, made by the upload command
    before the first deploy, like the API key: the very first proxy task already has its licence, and a
    destroyed stack leaves no named secret in the way of the next one. A new licence is a new secret value
    and a new proxy deployment; the upload command does both.

    The file system's policy lets only the proxy's task role mount it (`load_into`), and only over TLS. It
    is backed up daily by EFS's automatic backups.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        placement: SingleAzPlacement,
        key: kms.IKey,
        secret_name: str,
    ) -> None:
        super().__init__(scope, construct_id)
        allow_use_through(key, "elasticfilesystem")
        self.file_system = efs.FileSystem(
            self,
            "FileSystem",
            vpc=vpc,
            vpc_subnets=placement.subnets,
            encrypted=True,
            kms_key=key,
            removal_policy=KEEP_ONCE_CREATED,
            performance_mode=efs.PerformanceMode.GENERAL_PURPOSE,
            # CDK's name for "do not add CDK's own statement" (root and write access for any principal that
            # comes through a mount target): the policy here names its one client instead, and EFS refuses
            # every client a file system policy does not allow, anonymous ones included.
            allow_anonymous_access=True,
            # AWS Backup's default plan for EFS: daily, kept 35 days, in the vault EFS makes for it, neither
            # of which a stack deletion removes ("Backing up EFS file systems", Amazon EFS User Guide). A
            # plan of the stack's own, with a vault under the stack's key, would add a vault, a plan, a
            # selection and a role with AWS's managed backup policy, and the vault, retained because it
            # holds the recovery points, would keep its name and stop the next deploy after a destroy.
            enable_automatic_backups=True,
        )
        # A file system policy's statements name no resource: the policy is the file system's own.
        self.file_system.add_to_resource_policy(
            iam.PolicyStatement(
                sid="DenyWithoutTls",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["*"],
                conditions={"Bool": {"aws:SecureTransport": "false"}},
            )
        )
        acknowledge_compliance(
            self.file_system,
            "EFSInBackupPlan",
            reason="backed up by EFS automatic backups (BackupPolicy ENABLED: AWS Backup's default EFS plan, "
            "daily, 35 days), a plan outside the template; the rule looks only for an "
            "AWS::Backup::BackupSelection in it",
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
        self.secret = secretsmanager.Secret.from_secret_name_v2(self, "Licence", secret_name)
        self.load_failures: cloudwatch.IMetric | None = None  # once `load_into` has a proxy

    def load_into(self, proxy: SonicService, *, loader_image: ecs.ContainerImage, content_type: str) -> None:
        """Give `proxy` the file system (NFS from its security group; mount, write and root access for its
        role, in the file system's policy) and a loader container that uploads the secret's licence once the
        proxy answers. The loader mounts nothing: it POSTs to the proxy on localhost."""
        self.file_system.connections.allow_default_port_from(proxy.security_group, "licence proxy")
        # Root access because the proxy's user inside its image is not documented (UNVERIFIED): without it
        # EFS maps uid 0 to 65534, and the file system's root directory (root's, mode 755) would refuse the
        # proxy's writes. An access point with a POSIX user would make it unnecessary, at the price of moving
        # the data into a directory of its own (a deployed proxy's files would stay behind at the root).
        self.file_system.add_to_resource_policy(
            iam.PolicyStatement(
                sid="LicenceProxyOnly",
                principals=[proxy.task_definition.task_role],
                actions=[
                    "elasticfilesystem:ClientMount",
                    "elasticfilesystem:ClientWrite",
                    "elasticfilesystem:ClientRootAccess",
                ],
                conditions={"Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}},
            )
        )
        loader = proxy.task_definition.add_container(
            "licence-loader",
            image=loader_image,
            essential=False,  # it exits once the licence is in; the proxy goes on
            entry_point=["/bin/sh", "-c"],
            command=[loader_script(port=proxy.port, content_type=content_type)],
            secrets={"SONIC_LICENCE": ecs.Secret.from_secrets_manager(self.secret)},
            logging=ecs.LogDriver.aws_logs(stream_prefix="licence-loader", log_group=proxy.log_group),
        )
        # A proxy ECS replaces (a failed host, a deploy) reloads with nobody watching: count the loader's
        # give-ups from the log group both containers write to (no value when none: missing, not breaching).
        gave_up = proxy.log_group.add_metric_filter(
            "LicenceLoaderGaveUp",
            filter_pattern=logs.FilterPattern.literal(f'"{LOADER_GAVE_UP}"'),
            metric_namespace=SONIC_NAMESPACE,
            metric_name="LicenceLoadFailures",
            metric_value="1",
        )
        self.load_failures = gave_up.metric(statistic="Sum", period=Duration.minutes(5))
        loader.add_container_dependencies(
            ecs.ContainerDependency(
                container=proxy.container, condition=ecs.ContainerDependencyCondition.START
            )
        )
