"""CloudWatch metrics for scaling and alarms on the ECS route: GPU use from every GPU instance, and the
workers' and API server's Prometheus metrics, both through the CloudWatch agent with generated configs."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import Acknowledgment, Duration, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from sonic_deploy.constructs.egress import PrivateAws, https_only
from sonic_deploy.constructs.findings import acknowledge, acknowledge_compliance
from sonic_deploy.constructs.naming import physical_name
from sonic_deploy.constructs.retention import KEEP_ONCE_CREATED
from sonic_deploy.routes.ecs.constructs.gpu_capacity import GpuCapacity
from sonic_deploy.routes.ecs.constructs.sonic_service import PROMETHEUS_JOB_LABEL, PROMETHEUS_PORT_LABEL
from sonic_deploy.routes.ecs.constructs.worker_ttfa import WorkerTtfa
from sonic_deploy.routes.ecs.rules import HOST_AGENT_MEMORY_MIB

GPU_NAMESPACE = "CWAgent"
SONIC_NAMESPACE = "Sonic/ECS"
# Published as they are (gauges); inferno_worker_ttfa's form is config (WorkerTtfa).
WORKER_METRICS = ("inferno_worker_load", "inferno_worker_capacity", "inferno_worker_rtf")
API_METRICS = ("api_queue_size", "api_unserviceable_requests_size")
COLLECTION_INTERVAL_S = 10
ONE_MINUTE = Duration.minutes(1)


def gpu_agent_config() -> dict[str, Any]:
    """Agent config for each GPU host: nvidia_gpu, aggregated per Auto Scaling group."""
    return {
        "agent": {"metrics_collection_interval": COLLECTION_INTERVAL_S},
        "metrics": {
            "namespace": GPU_NAMESPACE,
            "append_dimensions": {
                "AutoScalingGroupName": "${aws:AutoScalingGroupName}",
                "InstanceId": "${aws:InstanceId}",
            },
            "aggregation_dimensions": [["AutoScalingGroupName"]],
            "metrics_collected": {
                "nvidia_gpu": {
                    "measurement": [
                        "utilization_gpu",
                        "utilization_memory",
                        "memory_used",
                        "memory_total",
                        "temperature_gpu",
                        "power_draw",
                    ],
                    "metrics_collection_interval": COLLECTION_INTERVAL_S,
                }
            },
        },
    }


TARGETS_FILE = "/tmp/cwagent_ecs_auto_sd.yaml"  # written by the agent's ECS service discovery


def scraper_agent_config(
    *, cluster_name: str, log_group_name: str, worker_job: str, api_job: str, worker_ttfa: WorkerTtfa
) -> dict[str, Any]:
    """Agent config for the one scraper: discover tasks by docker label, publish chosen series as EMF."""
    return {
        "agent": {"metrics_collection_interval": COLLECTION_INTERVAL_S},
        "logs": {
            "metrics_collected": {
                "prometheus": {
                    "cluster_name": cluster_name,
                    "log_group_name": log_group_name,
                    "prometheus_config_path": "env:PROMETHEUS_CONFIG_CONTENT",
                    "ecs_service_discovery": {
                        "sd_frequency": "30s",
                        "sd_result_file": TARGETS_FILE,
                        "docker_label": {
                            "sd_port_label": PROMETHEUS_PORT_LABEL,
                            "sd_job_name_label": PROMETHEUS_JOB_LABEL,
                        },
                    },
                    "emf_processor": {
                        "metric_namespace": SONIC_NAMESPACE,
                        "metric_declaration": [
                            {
                                "source_labels": ["job"],
                                "label_matcher": f"^{worker_job}$",
                                "dimensions": [["ClusterName"]],
                                "metric_selectors": [f"^{name}$" for name in WORKER_METRICS]
                                + worker_ttfa.emf_selectors(),
                            },
                            {
                                "source_labels": ["job"],
                                "label_matcher": f"^{api_job}$",
                                "dimensions": [["ClusterName"]],
                                "metric_selectors": [f"^{name}$" for name in API_METRICS],
                            },
                        ],
                    },
                }
            },
            "force_flush_interval": 5,
        },
    }


def prometheus_config() -> str:
    """The scrape settings; targets come from the agent's ECS service discovery file."""
    interval = f"{COLLECTION_INTERVAL_S}s"
    return (
        f"global:\n  scrape_interval: {interval}\n  scrape_timeout: 5s\n"
        "scrape_configs:\n  - job_name: cwagent-ecs-file-sd-config\n"
        f"    file_sd_configs:\n      - files: [{TARGETS_FILE}]\n"
    )


# Where the GPU hosts' agent reads its config (written by user data; the package creates the folder).
HOST_AGENT_CONFIG = "/opt/aws/amazon-cloudwatch-agent/etc/sonic-gpu.json"
HOST_AGENT_CTL = "/opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl"
# The install runs as this transient systemd unit (`journalctl -u sonic-gpu-metrics` on the host).
HOST_SCRIPT, HOST_UNIT = "/opt/sonic-deploy/install-gpu-metrics.sh", "sonic-gpu-metrics"


def gpu_host_agent_commands(config: dict[str, Any]) -> list[str]:
    """User-data lines that install the CloudWatch agent on a GPU host and start it with `config`.

    Why on the host and not as an ECS daemon: the ECS agent starts a container under the `nvidia` runtime
    only when its task has a GPU association (aws/amazon-ecs-agent agent/api/task/task.go,
    `if task.isGPUEnabled() && task.shouldRequireNvidiaRuntime(container)`, at 8dfceca6), and the AL2023 GPU
    AMI registers `nvidia` as a named runtime through /etc/docker-runtimes.d, never as Docker's default
    (aws/amazon-ecs-ami scripts/al2023/gpu/enable-ecs-agent-gpu-support-al2023.sh). A daemon that reserves no
    GPU therefore runs under runc: no /dev/nvidia*, no nvidia-smi, no metric. One that reserved a GPU would take
    the worker's only one. On the host the agent's `nvidia_gpu` input runs the driver's /usr/bin/nvidia-smi
    (read-only NVML queries, nothing reserved).

    The package comes from the AL2023 core repository, which is on S3: the VPC's S3 gateway endpoint reaches
    it without NAT (air-gapped mode; UNVERIFIED on AWS: the repositories' mirror list names an
    s3.dualstack host). Only that repository is enabled, so an unreachable third-party repository (the AMI adds
    NVIDIA's) cannot fail the install. It runs as a systemd unit beside the boot; a failure is logged there and
    the instance serves all the same (the GpuMetricsMissing alarm fires when no host reports).
    """
    return [
        "# sonic-deploy: GPU metrics from the host (see SonicMetrics).",
        # The agent runs outside ECS: keep its memory out of what ECS may place tasks into. The ECS agent
        # reads this file when it starts, after user data (ecs.service: After=cloud-final.service,
        # aws/amazon-ecs-agent packaging/amazon-linux-ami-integrated/ecs.service).
        f"echo ECS_RESERVED_MEMORY={HOST_AGENT_MEMORY_MIB} >> /etc/ecs/ecs.config",
        # Installed beside the boot, not in it: the ECS agent starts only after user data, and a slow
        # package download must not hold the instance out of the cluster.
        f"mkdir -p {HOST_SCRIPT.rsplit('/', 1)[0]}",
        f"cat > {HOST_SCRIPT} <<'SONIC_GPU_INSTALL'",
        "if timeout 600 dnf install -y --disablerepo='*' --enablerepo=amazonlinux "
        "--setopt=timeout=20 amazon-cloudwatch-agent; then",
        f"cat > {HOST_AGENT_CONFIG} <<'SONIC_GPU_AGENT'",
        json.dumps(config, sort_keys=True),
        "SONIC_GPU_AGENT",
        f"{HOST_AGENT_CTL} -a fetch-config -m ec2 -s -c file:{HOST_AGENT_CONFIG}",
        "else",
        "echo 'sonic-deploy: amazon-cloudwatch-agent did not install: no GPU metrics from this host' >&2",
        "exit 1",
        "fi",
        "SONIC_GPU_INSTALL",
        f"systemd-run --no-block --unit={HOST_UNIT} /bin/bash {HOST_SCRIPT}",
    ]


class SonicMetrics(Construct):
    """The CloudWatch agent twice: on every GPU host, installed from user data (GPU figures need the host's
    driver: see `gpu_host_agent_commands`), and as one scraper task (a scraper per instance would publish
    every worker's series once per instance)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: ecs.Cluster,
        gpu_capacity: GpuCapacity,
        agent_image: ecs.ContainerImage,
        subnets: ec2.SubnetSelection,
        log_key: kms.IKey,
        log_retention: logs.RetentionDays,
        worker_job: str,
        api_job: str,
        worker_ttfa: WorkerTtfa,
        scraper_cpu: int = 256,
        scraper_memory_mib: int = 512,
        private_aws: PrivateAws | None = None,
    ) -> None:
        """The scraper calls out on TCP 443 (ECS, CloudWatch Logs, its image) and to the metrics ports it is
        allowed to scrape, nothing else, in either licence mode; to AWS only with `private_aws`."""
        super().__init__(scope, construct_id)
        self.cluster_name = cluster.cluster_name
        self.worker_ttfa = worker_ttfa
        self.auto_scaling_group_name = gpu_capacity.auto_scaling_group.auto_scaling_group_name
        agent_logs = logs.LogGroup(
            self,
            "AgentLogs",
            encryption_key=log_key,
            retention=log_retention,
            removal_policy=KEEP_ONCE_CREATED,
        )
        metric_logs = logs.LogGroup(
            self,
            "PrometheusLogs",
            encryption_key=log_key,
            retention=log_retention,
            removal_policy=KEEP_ONCE_CREATED,
        )
        agent_policy = iam.ManagedPolicy.from_aws_managed_policy_name("CloudWatchAgentServerPolicy")

        self.instrument(gpu_capacity)

        scraper_task = ecs.FargateTaskDefinition(
            self,
            "ScraperTask",
            family=physical_name(self, "metrics-scraper"),
            cpu=scraper_cpu,
            memory_limit_mib=scraper_memory_mib,
        )
        scraper_task.task_role.add_managed_policy(agent_policy)
        scraper_task.add_to_task_role_policy(
            iam.PolicyStatement(
                # The tasks and hosts to scrape are found at run time: DescribeTaskDefinition and
                # DescribeInstances have no resource type (read-only calls, on "*").
                sid="DiscoverScrapeTargetsReadOnly",
                actions=["ecs:DescribeTaskDefinition", "ec2:DescribeInstances"],
                resources=["*"],
            )
        )
        scraper_task.add_to_task_role_policy(
            iam.PolicyStatement(
                # The agent lists and describes the tasks and container instances of this cluster only: each
                # call names the cluster, which the ecs:cluster condition key holds to this one (Service
                # Authorization Reference, Amazon ECS; the Resource stays "*" because ListTasks is authorised
                # against a container instance it does not name: awsdocs/amazon-ecs-developer-guide#211).
                sid="ListAndDescribeThisClustersTasks",
                actions=["ecs:ListTasks", "ecs:DescribeTasks", "ecs:DescribeContainerInstances"],
                resources=["*"],
                conditions={"ArnEquals": {"ecs:cluster": cluster.cluster_arn}},
            )
        )
        environment = {
            "CW_CONFIG_CONTENT": json.dumps(
                scraper_agent_config(
                    cluster_name=cluster.cluster_name,
                    log_group_name=metric_logs.log_group_name,
                    worker_job=worker_job,
                    api_job=api_job,
                    worker_ttfa=worker_ttfa,
                ),
                sort_keys=True,
            ),
            "PROMETHEUS_CONFIG_CONTENT": prometheus_config(),
        }
        pipeline = worker_ttfa.otel_pipeline(
            cluster_name=cluster.cluster_name,
            log_group_name=metric_logs.log_group_name,
            namespace=SONIC_NAMESPACE,
            worker_job=worker_job,
            targets_file=TARGETS_FILE,
        )
        if pipeline is not None:
            # JSON is YAML: the agent merges this OpenTelemetry pipeline into its own.
            environment["CW_OTEL_CONFIG_CONTENT"] = json.dumps(pipeline, sort_keys=True)
        scraper_task.add_container(
            "cloudwatch-agent",
            image=agent_image,
            environment=environment,
            logging=ecs.LogDriver.aws_logs(stream_prefix="scraper", log_group=agent_logs),
        )
        acknowledge(
            scraper_task,
            "AwsSolutions-ECS2",
            reason=f"plain variables {', '.join(sorted(environment))}: the agent's configuration, generated "
            "here from the cluster's and log group's names (nothing secret)",
        )
        acknowledge_compliance(
            scraper_task,
            "IAMNoInlinePolicy",
            reason="the scraper's task and execution roles hold CDK's grants for this task alone (its image, log "
            "group, ECS service discovery), in an inline policy that lives and goes with the role",
        )
        acknowledge(
            scraper_task.task_role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/CloudWatchAgentServerPolicy]",
            reason="AWS's documented policy for the CloudWatch agent",
        )
        acknowledge(
            scraper_task.obtain_execution_role(),
            "AwsSolutions-IAM5[Resource::*]",
            reason="ecr:GetAuthorizationToken is not resource-scoped",
        )
        acknowledge(
            scraper_task.task_role,
            "AwsSolutions-IAM5[Resource::*]",
            reason="DiscoverScrapeTargetsReadOnly: DescribeTaskDefinition and DescribeInstances take no resource; "
            "ListAndDescribeThisClustersTasks: ListTasks, DescribeTasks and DescribeContainerInstances on '*' but "
            "held to this cluster by the ecs:cluster condition (ListTasks is authorised against a container "
            "instance the call does not name)",
        )
        self.security_group = ec2.SecurityGroup(
            self,
            "ScraperSecurityGroup",
            vpc=cluster.vpc,
            description="Prometheus scraper: no ingress",
            allow_all_outbound=False,
        )
        https_only(self.security_group, private_aws)
        self.scraper = ecs.FargateService(
            self,
            "Scraper",
            cluster=cluster,
            task_definition=scraper_task,
            desired_count=1,
            vpc_subnets=subnets,
            security_groups=[self.security_group],
            assign_public_ip=False,
            min_healthy_percent=100,
            max_healthy_percent=200,
            circuit_breaker=ecs.DeploymentCircuitBreaker(enable=True, rollback=True),
        )

    def instrument(self, gpu_capacity: GpuCapacity) -> None:
        """The host CloudWatch agent on a GPU group's instances (GPU metrics), and what it may call."""
        # The host agent publishes GPU metrics and nothing else (its config has no logs section), so not
        # CloudWatchAgentServerPolicy, which adds logs:* writes and log group creation on "*".
        gpu_capacity.allow_on_any_resource(
            "PutMetricDataHasNoResourceTypeHeldToTheGpuNamespace",
            ["cloudwatch:PutMetricData"],
            why=f"no resource type; the cloudwatch:namespace condition holds it to {GPU_NAMESPACE}",
            conditions={"StringEquals": {"cloudwatch:namespace": GPU_NAMESPACE}},
        )
        # For ${aws:AutoScalingGroupName}: the agent's ec2tagger reads the instance's own tags.
        gpu_capacity.allow_on_any_resource(
            "DescribeTagsHasNoResourceType", ["ec2:DescribeTags"], why="no resource type; read-only"
        )
        gpu_capacity.user_data.add_commands(*gpu_host_agent_commands(gpu_agent_config()))
        Validations.of(gpu_capacity.launch_template).acknowledge(
            Acknowledgment(
                id="CloudFormation-Validate::E1029",
                reason="${aws:...} in the agent config are the CloudWatch agent's placeholders, not CloudFormation's",
            )
        )

    def sonic_metric(
        self, name: str, *, statistic: str = "Sum", period: Duration = ONE_MINUTE
    ) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=SONIC_NAMESPACE,
            metric_name=name,
            statistic=statistic,
            period=period,
            dimensions_map={"ClusterName": self.cluster_name},
        )

    def worker_ttfa_ms(self, *, period: Duration) -> cloudwatch.IMetric:
        """Worker time to first audio in ms: p95 of a gauge, the mean of a summary or histogram."""
        return self.worker_ttfa.in_milliseconds(
            lambda name, statistic: self.sonic_metric(name, statistic=statistic), period
        )

    def gpu_utilisation(
        self, *, statistic: str = "Average", period: Duration = ONE_MINUTE
    ) -> cloudwatch.Metric:
        return self.gpu_metric("utilization_gpu", statistic=statistic, period=period)

    def gpu_metric(
        self, measurement: str, *, statistic: str = "Average", period: Duration = ONE_MINUTE
    ) -> cloudwatch.Metric:
        """One of gpu_agent_config's nvidia_gpu measurements, over the GPU group, named
        nvidia_smi_<measurement> as nvidia_smi_utilization_gpu (the agent's input is telegraf's nvidia_smi
        plugin: memory_used and memory_total in MiB, telegraf plugins/inputs/nvidia_smi README)."""
        return cloudwatch.Metric(
            namespace=GPU_NAMESPACE,
            metric_name=f"nvidia_smi_{measurement}",
            statistic=statistic,
            period=period,
            dimensions_map={"AutoScalingGroupName": self.auto_scaling_group_name},
        )

    def gpu_memory_percent(self) -> cloudwatch.MathExpression:
        """GPU memory in use, % of the GPUs' memory: utilization_memory is nvidia-smi's memory-controller
        busy time, not memory used / total (influxdata/telegraf#16617 shows the two apart)."""
        return cloudwatch.MathExpression(
            expression="100 * used / total",
            using_metrics={
                "used": self.gpu_metric("memory_used", statistic="Sum"),
                "total": self.gpu_metric("memory_total", statistic="Sum"),
            },
            label="GPU memory used %",
            period=ONE_MINUTE,
        )

    def streams(self) -> dict[str, cloudwatch.Metric]:
        """Chunks in progress and chunks the workers can take, summed over the workers (what scaling tracks)."""
        return {
            name: self.sonic_metric(f"inferno_worker_{name}").with_(label=f"worker {name}")
            for name in ("load", "capacity")
        }
