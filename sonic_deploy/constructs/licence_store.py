"""The offline licence of air-gapped mode: where the operator puts it, how it reaches the licence proxy, and
where the proxy keeps it across restarts."""

from __future__ import annotations

from aws_cdk import SecretValue
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_efs as efs
from aws_cdk import aws_kms as kms
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from sonic_deploy.constructs.findings import acknowledge
from sonic_deploy.constructs.placement import SingleAzPlacement
from sonic_deploy.constructs.retention import KEEP_ONCE_CREATED
from sonic_deploy.constructs.sonic_service import SonicService

# What the secret holds until `sonic-deploy licence upload` replaces it: the loader then uploads nothing.
NO_LICENCE_YET = "sonic-deploy: no licence uploaded yet"
LOADER_TRIES, LOADER_PAUSE_S = 60, 5


def loader_script(*, port: int, content_type: str) -> str:
    """The loader's shell script (BusyBox sh and wget): wait for the proxy, POST the licence once, exit.

    The secret holds the licence file base64-encoded (`sonic-deploy licence upload` writes it so), so any
    bytes survive the trip through an environment variable. No `${...}` in it: CloudFormation would read it.
    """
    return "\n".join(
        [
            "set -eu",
            f'if [ "$SONIC_LICENCE" = "{NO_LICENCE_YET}" ]; then',
            "  echo 'no licence uploaded yet: run sonic-deploy licence upload'; exit 0",
            "fi",
            'printf %s "$SONIC_LICENCE" | base64 -d > /tmp/licence',
            "n=0",
            f"while [ $n -lt {LOADER_TRIES} ]; do",
            f"  if wget -q -O /dev/null --header 'Content-Type: {content_type}' --post-file /tmp/licence "
            f"http://127.0.0.1:{port}/license; then",
            "    echo 'licence uploaded to the licence proxy'; exit 0",
            "  fi",
            f"  n=$((n + 1)); sleep {LOADER_PAUSE_S}",
            "done",
            f"echo 'the licence proxy did not accept the licence after {LOADER_TRIES} tries' >&2",
            "exit 1",
        ]
    )


class LicenceStore(Construct):
    """An encrypted EFS file system in the placement's AZ where the proxy keeps its licence, and a
    KMS-encrypted secret the operator writes the licence into (`sonic-deploy licence upload`).

    Nothing can reach the proxy from outside in air-gapped mode (no egress, no bastion, ingress only from the
    API server and workers), so the licence goes the way the tasks' other secrets go: ECS reads the secret
    through the Secrets Manager endpoint when the task starts, and a loader container in the proxy's own task
    POSTs it to the proxy on localhost (`load_into`). A new licence is a new secret value and a new proxy
    deployment; the upload command does both.
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
        self.secret = secretsmanager.Secret(
            self,
            "Licence",
            secret_name=secret_name,
            encryption_key=key,
            description="Cartesia offline licence, base64 (sonic-deploy licence upload writes it)",
            secret_string_value=SecretValue.unsafe_plain_text(NO_LICENCE_YET),
            removal_policy=KEEP_ONCE_CREATED,
        )
        acknowledge(
            self.secret,
            "AwsSolutions-SMG4",
            reason="an offline licence is issued by Cartesia, not generated: there is nothing to rotate it to",
        )

    def load_into(self, proxy: SonicService, *, loader_image: ecs.ContainerImage, content_type: str) -> None:
        """Give `proxy` the file system (NFS from its security group, read/write for its role) and a loader
        container that uploads the secret's licence once the proxy answers."""
        self.file_system.connections.allow_default_port_from(proxy.security_group, "licence proxy")
        self.file_system.grant_read_write(proxy.task_definition.task_role)
        loader = proxy.task_definition.add_container(
            "licence-loader",
            image=loader_image,
            essential=False,  # it exits once the licence is in; the proxy goes on
            entry_point=["/bin/sh", "-c"],
            command=[loader_script(port=proxy.port, content_type=content_type)],
            secrets={"SONIC_LICENCE": ecs.Secret.from_secrets_manager(self.secret)},
            logging=ecs.LogDriver.aws_logs(stream_prefix="licence-loader", log_group=proxy.log_group),
        )
        loader.add_container_dependencies(
            ecs.ContainerDependency(
                container=proxy.container, condition=ecs.ContainerDependencyCondition.START
            )
        )
