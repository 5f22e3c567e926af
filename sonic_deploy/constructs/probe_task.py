"""The probe as a Fargate task inside the route's VPC: what `sonic-deploy probe ... --in-vpc ENV` starts and
the canary schedules, with the bucket its runs write their samples to."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import CfnOutput, CfnResource, Duration, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from constructs import Construct

from sonic_deploy.config.schema import ProbeTaskConfig, TurnHop
from sonic_deploy.constructs.egress import HTTPS, https_only
from sonic_deploy.constructs.encryption import encrypted_bucket
from sonic_deploy.constructs.findings import (
    acknowledge,
    acknowledge_compliance,
    acknowledge_custom_resource_handler,
    as_nag_prints,
    skip_checkov,
)
from sonic_deploy.constructs.naming import physical_name
from sonic_deploy.constructs.network import TRANSCRIBE_STREAMING_PORT, Network
from sonic_deploy.constructs.probe_image import ProbeImage
from sonic_deploy.constructs.retention import KEEP_ONCE_CREATED
from sonic_deploy.in_vpc import outputs
from sonic_deploy.in_vpc.protocol import RUNNER_KEYS, TASK_KEYS
from sonic_deploy.probe.canary_metrics import NAMESPACE as CANARY_NAMESPACE

CONTAINER_NAME = "probe"  # the contract's ProbeContainer: the runner and the canary override its command
RUNS_PREFIX = "runs/"
# What a task writes under its run's prefix (protocol.TASK_KEYS: ready/, results/, failed/), the task role's
# only writes; and what the runner writes (protocol.RUNNER_KEYS: run.json, commands/, stop.json,
# transcripts.txt) with the operator's credentials, which the S3 gateway endpoint lets through as well, for an
# operator who runs --in-vpc from inside the VPC (a bastion, a CI runner). IAM's `*` also matches '/', as the
# protocol's patterns' does, so "ready/*" is "runs/<anything>/ready/<anything>".
TASK_WRITES = tuple(f"{RUNS_PREFIX}*/{pattern}" for pattern in TASK_KEYS)
RUNNER_WRITES = tuple(f"{RUNS_PREFIX}*/{pattern}" for pattern in RUNNER_KEYS)
# CDK's stack-wide provider behind a bucket's `auto_delete_objects` (aws-cdk-lib aws-s3 lib/bucket.ts).
AUTO_DELETE_PROVIDER = (
    "Custom::S3AutoDeleteObjectsCustomResourceProvider"  # the runner's objects: runs/<run-id>/...
)
# Fargate tasks in subnets without NAT pull through ECR's two interface endpoints and S3's gateway, and log
# through CloudWatch Logs' endpoint ("Amazon ECR interface VPC endpoints (AWS PrivateLink)": tasks on Fargate
# platform 1.4.0 or later need com.amazonaws.region.ecr.dkr, ecr.api and the S3 gateway endpoint); the canary
# publishes its metrics through CloudWatch's (monitoring).
TASK_ENDPOINTS = [
    ec2.InterfaceVpcEndpointAwsService.ECR,
    ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
    ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_MONITORING,
]
# The interface endpoint of each of the turn probe's cloud hops (`[probe] turn_hops`), for a VPC without NAT:
# com.amazonaws.REGION.transcribestreaming (Amazon Transcribe Developer Guide, "Amazon Transcribe and
# interface VPC endpoints": streaming has its own service name, batch is `transcribe`) and bedrock-runtime.
TURN_HOP_ENDPOINTS: dict[TurnHop, ec2.InterfaceVpcEndpointAwsService] = {
    "transcribe": ec2.InterfaceVpcEndpointAwsService.TRANSCRIBE_STREAMING,
    "bedrock": ec2.InterfaceVpcEndpointAwsService.BEDROCK_RUNTIME,
}


def turn_hop_endpoints(hops: Sequence[TurnHop]) -> list[ec2.InterfaceVpcEndpointAwsService]:
    """The interface endpoints the listed hops need in a VPC without NAT, in TURN_HOP_ENDPOINTS' order."""
    return [service for hop, service in TURN_HOP_ENDPOINTS.items() if hop in hops]


def turn_hop_statements(scope: Construct, hops: Sequence[TurnHop]) -> list[iam.PolicyStatement]:
    """What the turn probe's clients call on each listed hop, and nothing else (Service Authorization
    Reference). Transcribe: `client/transcribe.py` opens a presigned WebSocket, which IAM authorises as
    transcribe:StartStreamTranscriptionWebSocket; it has no resource type, so "*" (Developer Guide, "IAM policy
    for WebSocket requests"). Bedrock: `client/bedrock.py` calls ConverseStream, which IAM authorises as
    bedrock:InvokeModelWithResponseStream (User Guide, "Prerequisites for running model inference") on the
    model id's resource: a foundation model, or an inference profile of this account and Region, which routes
    to the foundation model in each of its destination Regions and needs the grant there too, hence the
    foundation models of any Region (User Guide, "Prerequisites for inference profiles")."""
    stack = Stack.of(scope)
    statements = []
    if "transcribe" in hops:
        statements.append(
            iam.PolicyStatement(
                sid="TranscribeTheCallersSpeech",
                actions=["transcribe:StartStreamTranscriptionWebSocket"],
                resources=["*"],
            )
        )
    if "bedrock" in hops:
        statements.append(
            iam.PolicyStatement(
                sid="StreamTheModelsReply",
                actions=["bedrock:InvokeModelWithResponseStream"],
                resources=[
                    f"arn:{stack.partition}:bedrock:*::foundation-model/*",
                    f"arn:{stack.partition}:bedrock:{stack.region}:{stack.account}:inference-profile/*",
                ],
            )
        )
    return statements


def invoke_endpoint(endpoint_arn: str) -> iam.PolicyStatement:
    """The SageMaker route's probe: both invocation forms on its one endpoint."""
    return iam.PolicyStatement(
        sid="InvokeTheEndpoint",
        actions=["sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointWithResponseStream"],
        resources=[endpoint_arn],
    )


class ProbeTask(Construct):
    """A Fargate task definition ("probe": the probe image, read-only root filesystem with a writable /tmp,
    Linux/X86_64) with a least-privilege task role, a security group whose egress is only what the probe
    calls, the encrypted bucket its runs write to (runs/, expired after `[probe] results_retention_days`;
    the task's size is `[probe]`'s too), and the stack
    outputs the in-VPC runner reads (ProbeCluster, ProbeTaskDefinition, ProbeContainer, ProbeSubnets,
    ProbeSecurityGroup, ProbeBucket).

    `cluster`: the route's own (ECS), else an empty one of the probe's (SageMaker has none). `calls_in_vpc`:
    ports the probe calls inside the VPC besides HTTPS (the ECS API's listener). `task_statements`: what the
    probe's target needs (`invoke_endpoint`); `secrets`: variables from Secrets Manager (CARTESIA_API_KEY).
    `[probe] turn_hops` adds each hop's grant (`turn_hop_statements`) and Transcribe's port; the stack adds
    their endpoints where the VPC has no NAT (`turn_hop_endpoints`), as it does TASK_ENDPOINTS.
    `log_retention` and `log_retention_days` are the same retention (the copy's log group takes a number).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        network: Network,
        vpc_cidr: str,
        subnets: ec2.SubnetSelection,
        key: kms.IKey,
        log_retention: logs.RetentionDays,
        log_retention_days: int,
        config: ProbeTaskConfig,
        cluster: ecs.ICluster | None = None,
        calls_in_vpc: Sequence[ec2.Port] = (),
        task_statements: Sequence[iam.PolicyStatement] = (),
        secrets: Mapping[str, ecs.Secret] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.subnets = subnets
        # Container Insights on the SageMaker probe's own cluster too (its custom metrics and performance
        # logs are billed, docs/deploy.md): when the canary's TTFA alarm fires, the probe task's CPU and
        # memory are what tell a starved probe from a slow route.
        self.cluster = cluster or ecs.Cluster(
            self, "Cluster", vpc=network.vpc, container_insights_v2=ecs.ContainerInsights.ENABLED
        )
        self.image = ProbeImage(self, "Image", key=key, copy_log_retention_days=log_retention_days)
        self.bucket = self._bucket(key, Duration.days(config.results_retention_days))
        # The probe writes its samples to its bucket through the S3 gateway endpoint, which lets through
        # only reads otherwise: what a task writes, and what the runner writes when it runs in the VPC too.
        network.allow_s3_writes(
            "WriteTheProbeBucket",
            [self.bucket.arn_for_objects(pattern) for pattern in (*TASK_WRITES, *RUNNER_WRITES)],
        )

        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=network.vpc,
            description="Probe tasks: no ingress; egress to what the probe calls",
            allow_all_outbound=False,
        )
        # HTTPS: the interface endpoints (ECR, logs, monitoring, the SageMaker runtime), S3's gateway (image
        # layers, the bucket), and a TLS listener of the ECS API (egress.py says why not a narrower peer).
        # Where the subnets route to NAT (connected ECS) that reaches the internet too, as the services'
        # groups do there; the probe calls only what its command names.
        https_only(self.security_group)
        if "transcribe" in config.turn_hops:
            # Its endpoint's address in a VPC without NAT (whose subnets route nothing else, as https_only
            # says), the service's public one through NAT.
            self.security_group.add_egress_rule(
                ec2.Peer.any_ipv4(),
                ec2.Port.tcp(TRANSCRIBE_STREAMING_PORT),
                "Amazon Transcribe streaming's WebSocket port ([probe] turn_hops)",
            )
        for port in calls_in_vpc:
            if port.to_string() != HTTPS.to_string():  # HTTPS is allowed already
                self.security_group.add_egress_rule(
                    ec2.Peer.ipv4(vpc_cidr), port, "The probed API in the VPC"
                )

        self.task_role = iam.Role(
            self,
            "TaskRole",
            assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"),
            description="sonic-deploy probe task: its runs' objects, the canary's metrics, its target",
        )
        hop_statements = turn_hop_statements(self, config.turn_hops)
        for statement in [*self._task_statements(key), *task_statements, *hop_statements]:
            self.task_role.add_to_policy(statement)
        self.execution_role = iam.Role(
            self,
            "ExecutionRole",
            assumed_by=iam.ServicePrincipal("ecs-tasks.amazonaws.com"),
            description="sonic-deploy probe task: pull its image, write its logs, read its secrets",
        )
        self.log_group = logs.LogGroup(
            self, "Logs", encryption_key=key, retention=log_retention, removal_policy=KEEP_ONCE_CREATED
        )
        self.task_definition = ecs.FargateTaskDefinition(
            self,
            "Task",
            family=physical_name(self, "probe"),
            cpu=config.cpu,
            memory_limit_mib=config.memory_mib,
            task_role=self.task_role,
            execution_role=self.execution_role,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.X86_64,
                operating_system_family=ecs.OperatingSystemFamily.LINUX,
            ),
            volumes=[ecs.Volume(name="tmp")],
        )
        self.container = self.task_definition.add_container(
            CONTAINER_NAME,
            container_name=CONTAINER_NAME,
            image=self.image.image(),
            readonly_root_filesystem=True,
            # An init process as PID 1 (ECS task definition parameters, linuxParameters.initProcessEnabled):
            # StopTask's SIGTERM reaches the probe at once, even before it installs its handler, and child
            # processes are reaped.
            linux_parameters=ecs.LinuxParameters(self, "Linux", init_process_enabled=True),
            secrets=dict(secrets or {}),
            logging=ecs.LogDriver.aws_logs(stream_prefix=CONTAINER_NAME, log_group=self.log_group),
        )
        # The run's samples, summary and report are written under --out there (the canary's /tmp/canary).
        self.container.add_mount_points(
            ecs.MountPoint(source_volume="tmp", container_path="/tmp", read_only=False)
        )
        self.image.before_use(self.task_definition)
        self._acknowledge(hop_statements)
        self._outputs()

    def _bucket(self, key: kms.IKey, retention: Duration) -> s3.Bucket:
        """Deleted with the stack, its objects with it (auto-delete): it holds only runs' samples, which the
        runner has already merged into its local summary; a retained bucket would be left for the owner to
        empty and delete by hand after every `make destroy`, and one still holding objects fails the delete."""
        # Expiring a current version of a versioned bucket only adds a delete marker: the noncurrent versions
        # go a day later, and the second rule removes the markers then left alone (S3 User Guide, "Lifecycle
        # configuration elements": ExpiredObjectDeleteMarker cannot share an Expiration with Days).
        bucket = encrypted_bucket(
            self,
            "Bucket",
            key=key,
            rule_id="Runs",
            prefix=RUNS_PREFIX,
            expiration=retention,
            more_rules=[
                s3.LifecycleRule(
                    id="RunsDeleteMarkers", prefix=RUNS_PREFIX, expired_object_delete_marker=True
                )
            ],
            removal_policy=RemovalPolicy.DESTROY,
            auto_delete_objects=True,
        )
        not_logged = (
            "it holds only probe runs' samples, written by the probe task's role and read by the operator who "
            "started the run; who did either is in CloudTrail, and logging reads of this bucket into another "
            "bucket would repeat the question for that one"
        )
        acknowledge(bucket, "AwsSolutions-S1", reason=not_logged)
        acknowledge_compliance(bucket, "S3BucketLoggingEnabled", reason=not_logged)
        skip_checkov(bucket, "CKV_AWS_18", reason=not_logged)
        _acknowledge_auto_delete_provider(Stack.of(self))
        acknowledge_compliance(
            bucket,
            "S3BucketReplicationEnabled",
            reason="latency samples of probe runs, merged into the runner's local summary when the run ends: "
            "losing them with the Region loses nothing; versioning and the lifecycle rule keep them meanwhile",
        )
        return bucket

    def _task_statements(self, key: kms.IKey) -> list[iam.PolicyStatement]:
        region = Stack.of(self).region
        return [
            iam.PolicyStatement(
                sid="ReadItsRuns",
                actions=["s3:GetObject"],
                resources=[self.bucket.arn_for_objects(f"{RUNS_PREFIX}*")],
            ),
            # Create only: a put without If-None-Match is refused, so no task overwrites what another task
            # or run wrote (S3 User Guide, "Enforce conditional writes on Amazon S3 buckets": s3:if-none-match).
            # Which run's prefix it writes stays unchecked: IAM sees no run id in a task's session.
            iam.PolicyStatement(
                sid="WriteItsResults",
                actions=["s3:PutObject"],
                resources=[self.bucket.arn_for_objects(pattern) for pattern in TASK_WRITES],
                conditions={"Null": {"s3:if-none-match": "false"}},
            ),
            # A task polls for keys that do not exist yet (the runner's next command): S3 answers a missing
            # key 404 NoSuchKey only to a caller with s3:ListBucket on the bucket, else 403 AccessDenied (S3
            # API Reference, GetObject, "Permissions"). That check has no s3:prefix to match, so a prefix
            # condition here would turn every poll into AccessDenied: the whole bucket, which holds only runs.
            iam.PolicyStatement(
                sid="ListItsBucket",
                actions=["s3:ListBucket"],
                resources=[self.bucket.bucket_arn],
            ),
            # SSE-KMS: a PutObject needs GenerateDataKey, a GetObject Decrypt, on the bucket's key, through S3.
            iam.PolicyStatement(
                sid="EncryptItsRunsWithTheBucketKey",
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=[key.key_arn],
                conditions={"StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"}},
            ),
            # PutMetricData has no resource; the namespace condition key holds it to the canary's.
            iam.PolicyStatement(
                sid="PublishCanaryMetrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": CANARY_NAMESPACE}},
            ),
        ]

    def _acknowledge(self, hop_statements: Sequence[iam.PolicyStatement]) -> None:
        hops = {statement.sid: statement for statement in hop_statements}
        unscoped = (
            f"PublishCanaryMetrics: cloudwatch:PutMetricData has no resource; the cloudwatch:namespace "
            f"condition holds it to {CANARY_NAMESPACE}"
        )
        if "TranscribeTheCallersSpeech" in hops:
            unscoped += (
                "; TranscribeTheCallersSpeech ([probe] turn_hops): transcribe:StartStreamTranscriptionWebSocket "
                "has no resource type (Service Authorization Reference)"
            )
        acknowledge(self.task_role, "AwsSolutions-IAM5[Resource::*]", reason=unscoped)
        if (bedrock := hops.get("StreamTheModelsReply")) is not None:
            acknowledge(
                self.task_role,
                *(f"AwsSolutions-IAM5[Resource::{as_nag_prints(arn)}]" for arn in bedrock.resources),
                reason="StreamTheModelsReply ([probe] turn_hops): bedrock:InvokeModelWithResponseStream only, "
                "on whichever model or inference profile --llm-model names at run time (not known at deploy), "
                "and a cross-Region profile's foundation model in each of its destination Regions",
            )
        bucket = _logical_id(self.bucket)
        acknowledge(
            self.task_role,
            f"AwsSolutions-IAM5[Resource::<{bucket}.Arn>/{RUNS_PREFIX}*]",
            reason="ReadItsRuns: the objects of its own bucket's runs/ prefix, one per run and file",
        )
        acknowledge(
            self.task_role,
            *(f"AwsSolutions-IAM5[Resource::<{bucket}.Arn>/{pattern}]" for pattern in TASK_WRITES),
            reason="WriteItsResults: what a task writes in a run of its own bucket (ready/, results/, failed/ "
            "of sonic_deploy/in_vpc/protocol.py), one object per task, command and file",
        )
        acknowledge(
            self.execution_role,
            "AwsSolutions-IAM5[Resource::*]",
            reason="ecr:GetAuthorizationToken is not resource-scoped",
        )
        for role in (self.task_role, self.execution_role):
            acknowledge_compliance(
                role,
                "IAMNoInlinePolicy",
                reason="the probe's task and execution roles hold the grants of this task alone (its image, "
                "log group, bucket prefix, metric namespace, target), in inline policies that live and go with "
                "the roles",
            )

    def _outputs(self) -> None:
        """The contract's outputs, at the stack's root so that their keys are exactly these names."""
        stack = Stack.of(self)
        CfnOutput(stack, outputs.PROBE_CLUSTER, value=self.cluster.cluster_name)
        CfnOutput(stack, outputs.PROBE_TASK_DEFINITION, value=self.task_definition.task_definition_arn)
        CfnOutput(stack, outputs.PROBE_CONTAINER, value=CONTAINER_NAME)
        CfnOutput(
            stack,
            outputs.PROBE_SUBNETS,
            value=",".join(subnet.subnet_id for subnet in self.subnets.subnets or []),
        )
        CfnOutput(stack, outputs.PROBE_SECURITY_GROUP, value=self.security_group.security_group_id)
        CfnOutput(stack, outputs.PROBE_BUCKET, value=self.bucket.bucket_name)


def _acknowledge_auto_delete_provider(stack: Stack) -> None:
    """The Lambda function behind the bucket's auto-delete (CDK's one provider per stack, at its root)."""
    provider = stack.node.try_find_child(AUTO_DELETE_PROVIDER)
    handler = provider.node.try_find_child("Handler") if provider is not None else None
    role = provider.node.try_find_child("Role") if provider is not None else None
    assert isinstance(handler, CfnResource), f"{AUTO_DELETE_PROVIDER} has no handler: has CDK renamed it?"
    if isinstance(role, CfnResource):
        # CDK's explicit DependsOn repeats what the function's GetAtt of the role already orders
        # (cfn-lint W3005).
        handler.remove_dependency(role)
    acknowledge_custom_resource_handler(
        handler,
        outside_vpc="it calls only S3's API (list and delete the probe bucket's objects) when CloudFormation "
        "deletes the bucket, from the Lambda service's network, and needs nothing in the VPC",
    )


def _logical_id(construct: Construct) -> str:
    default = construct.node.default_child
    assert default is not None
    return Stack.of(construct).get_logical_id(default)  # type: ignore[arg-type]
