"""One of Cartesia's self-hosted services on ECS: task definition, logs, security group, service."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from sonic_deploy.constructs.egress import PrivateAws, https_only
from sonic_deploy.constructs.findings import acknowledge, acknowledge_compliance
from sonic_deploy.constructs.naming import physical_name
from sonic_deploy.constructs.retention import KEEP_ONCE_CREATED

PROMETHEUS_PORT_LABEL = "ECS_PROMETHEUS_EXPORTER_PORT"
PROMETHEUS_JOB_LABEL = "ECS_PROMETHEUS_JOB_NAME"
DEFAULT_START_PERIOD = Duration.seconds(60)
# What the plain variables Cartesia's bundle is known to set are (named in AwsSolutions-ECS2's acknowledgement).
KNOWN_SETTINGS = {"WORKER_REPLICAS": "a replica count (workers per GPU)"}


def plain_variables_reason(
    environment: Mapping[str, str], not_secrets: Sequence[str] = (), addresses: Sequence[str] = ()
) -> str:
    """Why a task definition's plain variables are not secrets: each named, with what it is when known."""

    def what(name: str) -> str:
        if name in addresses:
            return "a peer's Cloud Map address"
        if name in not_secrets:
            return "named like a secret, declared none in config (not_secrets)"
        return KNOWN_SETTINGS.get(name, "a setting from config")

    listed = ", ".join(f"{name} ({what(name)})" for name in sorted(environment))
    return (
        f"plain variables {listed}: not secrets; config load refuses a plain variable named with a part like "
        "KEY, TOKEN, SECRET, PASSWORD or AUTH (cartesia_rules.SECRET_NAME_PARTS) unless not_secrets lists it, and secrets "
        "come from Secrets Manager"
    )


@dataclass(frozen=True)
class ContainerSpec:
    """What runs in the task. Secrets are injected by ECS from Secrets Manager, never as plain values."""

    image: ecs.ContainerImage
    port: int
    cpu: int
    memory_mib: int
    environment: Mapping[str, str] = field(default_factory=dict)
    not_secrets: Sequence[str] = ()  # names in `environment` that look like secrets and are not (config)
    # Peer ("nats", "licence_proxy") -> the variable the image reads its address from (config).
    peer_variables: Mapping[str, str] = field(default_factory=dict)
    secrets: Mapping[str, ecs.Secret] = field(default_factory=dict)
    command: Sequence[str] = ()
    health_check: Sequence[str] = ()
    health_start_period: Duration = DEFAULT_START_PERIOD
    health_retries: int = 3
    metrics_port: int | None = None
    gpu: bool = False
    # SIGTERM to SIGKILL. ECS sends SIGTERM only once the load balancer has drained the task (target UNUSED
    # after the deregistration delay); None leaves ECS's default, 30 s.
    stop_timeout: Duration | None = None


@dataclass(frozen=True)
class GpuPlacement:
    """Run on the GPU capacity provider, one task per instance."""

    capacity_provider: ecs.AsgCapacityProvider


class SonicService(Construct):
    """A service in the placement's one subnet, on Fargate or (with `gpu_placement`) on the GPU instances,
    with Cloud Map discovery as `<discovery_name>.<namespace>`, circuit breaker with rollback, 100% minimum
    healthy, and an encrypted log group."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: ecs.Cluster,
        discovery_name: str,
        container: ContainerSpec,
        desired_count: int | None,
        subnets: ec2.SubnetSelection,
        log_key: kms.IKey,
        log_retention: logs.RetentionDays,
        gpu_placement: GpuPlacement | None = None,
        deployment_alarms: Sequence[cloudwatch.IAlarm] = (),
        volume: tuple[ecs.Volume, str] | None = None,
        metrics_job: str | None = None,
        peer_urls: Mapping[str, str] | None = None,
        private_aws: PrivateAws | None = None,
    ) -> None:
        """`desired_count`: None when Application Auto Scaling owns the count (its scalable target keeps the
        floor): the template then leaves DesiredCount out, so that a deploy keeps the count it scaled to.
        `peer_urls`: peer -> its address, given to the container in the variables `peer_variables` names.
        `metrics_job`: the Prometheus job its metrics join (default: `discovery_name`; the overflow workers
        join the workers'). Egress in either licence mode: TCP 443 (see `https_only`; to AWS only with `private_aws`) and the ports of the
        peers it is wired to, nothing else."""
        super().__init__(scope, construct_id)
        self.discovery_name = discovery_name
        self.port = container.port
        self.metrics_port = container.metrics_port
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=cluster.vpc,
            description=f"{discovery_name}: ingress from named peers only",
            allow_all_outbound=False,
        )
        https_only(self.security_group, private_aws)
        self.log_group = logs.LogGroup(
            self, "Logs", encryption_key=log_key, retention=log_retention, removal_policy=KEEP_ONCE_CREATED
        )
        addresses = {variable: (peer_urls or {})[peer] for peer, variable in container.peer_variables.items()}
        environment = {**container.environment, **addresses}
        self.task_definition: ecs.TaskDefinition
        family = physical_name(self, discovery_name)
        if gpu_placement is None:
            self.task_definition = ecs.FargateTaskDefinition(
                self, "Task", family=family, cpu=container.cpu, memory_limit_mib=container.memory_mib
            )
        else:
            self.task_definition = ecs.Ec2TaskDefinition(
                self, "Task", family=family, network_mode=ecs.NetworkMode.AWS_VPC
            )
        self.container = self.task_definition.add_container(
            discovery_name,
            image=container.image,
            cpu=container.cpu if gpu_placement else None,
            memory_reservation_mib=container.memory_mib if gpu_placement else None,
            gpu_count=1 if container.gpu else None,
            stop_timeout=container.stop_timeout,
            environment=environment,
            secrets=dict(container.secrets),
            command=list(container.command) or None,
            port_mappings=[ecs.PortMapping(container_port=container.port, name=discovery_name)],
            logging=ecs.LogDriver.aws_logs(stream_prefix=discovery_name, log_group=self.log_group),
            health_check=ecs.HealthCheck(
                command=list(container.health_check),
                start_period=container.health_start_period,
                retries=container.health_retries,
                interval=Duration.seconds(30),
                timeout=Duration.seconds(5),
            )
            if container.health_check
            else None,
            docker_labels={
                PROMETHEUS_PORT_LABEL: str(container.metrics_port),
                PROMETHEUS_JOB_LABEL: metrics_job or discovery_name,
            }
            if container.metrics_port
            else None,
        )
        if environment:
            acknowledge(
                self.task_definition,
                "AwsSolutions-ECS2",
                reason=plain_variables_reason(environment, container.not_secrets, list(addresses)),
            )
        acknowledge_compliance(
            self.task_definition,
            "IAMNoInlinePolicy",
            reason="the task and execution roles' statements are the grants CDK writes for this task alone "
            "(its image, log group, secrets, file system), in an inline policy that lives and goes with the role",
        )
        acknowledge(
            self.task_definition.obtain_execution_role(),
            "AwsSolutions-IAM5[Resource::*]",
            reason="ecr:GetAuthorizationToken is not resource-scoped",
        )
        if volume is not None:
            self.task_definition.add_volume(
                name=volume[0].name, efs_volume_configuration=volume[0].efs_volume_configuration
            )
            self.container.add_mount_points(
                ecs.MountPoint(source_volume=volume[0].name, container_path=volume[1], read_only=False)
            )

        common: dict[str, Any] = {
            "cluster": cluster,
            "task_definition": self.task_definition,
            # None omits DesiredCount (CDK passes it through as is): CloudFormation re-sends one it has on every
            # update of the service, undoing Application Auto Scaling (aws/containers-roadmap#493); without one
            # an update keeps the count, and a create starts 1 task (aws/aws-cdk#13130; docs/deploy.md).
            "desired_count": desired_count,
            "vpc_subnets": subnets,
            "security_groups": [self.security_group],
            "min_healthy_percent": 100,
            "max_healthy_percent": 200,
            "circuit_breaker": ecs.DeploymentCircuitBreaker(enable=True, rollback=True),
            "cloud_map_options": ecs.CloudMapOptions(name=discovery_name, dns_ttl=Duration.seconds(10)),
            "deployment_alarms": ecs.DeploymentAlarmConfig(
                alarm_names=[alarm.alarm_name for alarm in deployment_alarms],
                behavior=ecs.AlarmBehavior.ROLLBACK_ON_ALARM,
            )
            if deployment_alarms
            else None,
            "propagate_tags": ecs.PropagatedTagSource.SERVICE,
        }
        self.service: ecs.BaseService
        if gpu_placement is None:
            self.service = ecs.FargateService(self, "Service", assign_public_ip=False, **common)
        else:
            self.service = ecs.Ec2Service(
                self,
                "Service",
                capacity_provider_strategies=[
                    ecs.CapacityProviderStrategy(
                        capacity_provider=gpu_placement.capacity_provider.capacity_provider_name, weight=1
                    )
                ],
                placement_constraints=[ecs.PlacementConstraint.distinct_instances()],
                **common,
            )
        # The capacity provider must be associated with the cluster before the service names it. On that
        # resource only: the cluster and its namespace are already referenced (cfn-lint W3005).
        if gpu_placement is not None:
            self.service.node.add_dependency(
                *(
                    c
                    for c in cluster.node.children
                    if isinstance(c, ecs.CfnClusterCapacityProviderAssociations)
                )
            )

    def task_count(self, name: str, *, statistic: str = "Average") -> cloudwatch.Metric:
        """A Container Insights count of this service's tasks: DesiredTaskCount, RunningTaskCount or
        PendingTaskCount (named in the CloudWatch User Guide's list of Container Insights metrics for ECS,
        Application Insights, "Amazon ECS"), in namespace ECS/ContainerInsights with dimensions ClusterName and
        ServiceName (as mapbox/ecs-watchbot#351 found them in the console). The cluster has Container Insights
        on (EcsStack)."""
        return cloudwatch.Metric(
            namespace="ECS/ContainerInsights",
            metric_name=name,
            statistic=statistic,
            period=Duration.minutes(1),
            dimensions_map={
                "ClusterName": self.service.cluster.cluster_name,
                "ServiceName": self.service.service_name,
            },
            label=name.removesuffix("TaskCount").lower(),
        )

    def tasks_not_running(self) -> cloudwatch.MathExpression:
        """Tasks of this service not running (waiting for an instance, or crash-looping or stopping), per
        minute: the larger of PendingTaskCount and desired - running.

        PendingTaskCount is named in AWS's list of Container Insights metrics for ECS (CloudWatch User Guide,
        Application Insights, "Amazon ECS": no definition there); ECS's own pendingCount is "the number of
        tasks in the cluster that are in the PENDING state" (ECS API Reference, Service). Whether a task still
        in PROVISIONING (waiting for the capacity provider to launch a GPU instance) counts is not documented,
        so this takes the larger of it and desired - running, which counts both. MAX of an array of time
        series is the per-point maximum (CloudWatch User Guide, "Metric math syntax and functions"; the
        search tool here returned that page without its function table: UNVERIFIED in this repository).
        desired - running also counts tasks that start and crash again, or are stopping: those are not
        running either, and the description names them. UNVERIFIED: AWS/ECS service metrics are not sent
        for a service with no RUNNING task; whether Container Insights stops sending RunningTaskCount the
        same way is not documented. If it does, the expression has no value while nothing runs, and an
        alarm on it (missing data not breaching) stays quiet; WorkerMetricsMissing still sees it (no worker left to scrape).
        """
        return cloudwatch.MathExpression(
            expression="MAX([pending, desired - running])",
            using_metrics={
                "pending": self.task_count("PendingTaskCount"),
                "desired": self.task_count("DesiredTaskCount"),
                "running": self.task_count("RunningTaskCount"),
            },
            label="worker tasks not running",
            period=Duration.minutes(1),
        )

    def allow_from(
        self, peer: SonicService | ec2.ISecurityGroup, description: str, *, port: int | None = None
    ) -> None:
        """Ingress from `peer` on the service's port (or another of its ports, e.g. for metrics), and the
        matching egress on the peer's group when its egress is restricted."""
        group = peer.security_group if isinstance(peer, SonicService) else peer
        self.security_group.connections.allow_from(group, ec2.Port.tcp(port or self.port), description)
