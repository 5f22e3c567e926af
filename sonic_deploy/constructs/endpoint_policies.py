"""What the VPC endpoints let through: the AWS-owned S3 objects a route reads through the gateway endpoint,
and each interface endpoint's policy."""

from __future__ import annotations

from aws_cdk import Aws, Stack
from aws_cdk import aws_iam as iam
from constructs import Construct

# Interface endpoints whose service takes no endpoint policy: the `ecs` endpoint does, `ecs-agent` and
# `ecs-telemetry` do not (awsdocs/amazon-ecs-developer-guide issue #55; the ECS guide's "Creating a VPC
# endpoint policy" section covers `ecs` only). CreateVpcEndpoint refuses a policy for such a service.
NO_ENDPOINT_POLICY = frozenset({"ecs-agent", "ecs-telemetry"})


def ecr_image_layers(scope: Construct) -> str:
    """The objects of the AWS-owned bucket that ECR keeps image layers in: a pull reads them through the S3
    gateway endpoint (ECR user guide, "Amazon ECR interface VPC endpoints": "Minimum Amazon S3 bucket
    permissions for Amazon ECR", arn:aws:s3:::prod-region-starport-layer-bucket/*)."""
    stack = Stack.of(scope)
    return f"arn:{stack.partition}:s3:::prod-{stack.region}-starport-layer-bucket/*"


def al2023_packages(scope: Construct) -> str:
    """The objects of the AWS-owned bucket that holds the AL2023 package repositories (dnf on the GPU hosts,
    see SonicMetrics), named as AWS Application Migration Service's network requirements name it for its
    AL2023 servers: arn:aws:s3:::al2023-repos-{region}-de612dc2/*. UNVERIFIED on AWS for every Region."""
    return f"arn:{Stack.of(scope).partition}:s3:::al2023-repos-{Stack.of(scope).region}-de612dc2/*"


def interface_endpoint_policy(scope: Construct, service: str) -> list[iam.PolicyStatement]:
    """What an interface endpoint lets through: this account's principals (`aws:PrincipalAccount`), on this
    account's resources where the actions have resources, and only the actions the routes call through it.
    Empty for a service that takes no endpoint policy. A service not listed here is refused at synth, so a
    new endpoint gets a policy chosen for it."""
    stack = Stack.of(scope)

    def here(service_prefix: str) -> str:
        return f"arn:{stack.partition}:{service_prefix}:{stack.region}:{stack.account}"

    if service in NO_ENDPOINT_POLICY:
        return []
    # (sid, actions, resources) per statement; every statement is for this account's principals only.
    grants: dict[str, list[tuple[str, list[str], list[str]]]] = {
        # Image pulls by the GPU hosts' ECS agent. GetAuthorizationToken has no resource (Service
        # Authorization Reference, Amazon ECR); the rest are on repositories, all of them this account's.
        "ecr.api": [
            ("RegistryLoginNoResource", ["ecr:GetAuthorizationToken"], ["*"]),
            (
                "PullFromThisAccountsRepositories",
                ["ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"],
                [f"{here('ecr')}:repository/*"],
            ),
        ],
        # Task secrets, read by the ECS agent with the tasks' execution roles.
        "secretsmanager": [
            (
                "ReadThisAccountsSecrets",
                ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                [f"{here('secretsmanager')}:secret:*"],
            )
        ],
        # Log groups and streams (awslogs driver, CloudWatch agent); every logs resource ARN starts so.
        "logs": [("ThisAccountsLogGroups", ["logs:*"], [f"{here('logs')}:*"])],
        # PutMetricData has no resource; its namespaces are the callers' roles' to limit.
        "monitoring": [("PutMetricDataNoResource", ["cloudwatch:PutMetricData"], ["*"])],
        # The agent's container-instance and task calls; DiscoverPollEndpoint has no resource.
        "ecs": [("EcsCallsOfThisAccountsPrincipals", ["ecs:*"], ["*"])],
        # The GPU hosts' agent reads its instance's tags (DescribeTags has no resource).
        "ec2": [("DescribeOnlyNoResource", ["ec2:Describe*"], ["*"])],
        "sagemaker.runtime": [
            (
                "InvokeThisAccountsEndpoints",
                ["sagemaker:InvokeEndpoint*"],
                [f"{here('sagemaker')}:endpoint/*"],
            ),
        ],
        # The turn probe's hops ([probe] turn_hops, constructs/probe_task.py's turn_hop_statements): the one
        # action each client's call is authorised as. Streaming transcription has no resource type; the
        # endpoint takes a policy (Transcribe Developer Guide, "Creating a VPC endpoint policy").
        "transcribestreaming": [
            ("StreamTranscriptionNoResource", ["transcribe:StartStreamTranscriptionWebSocket"], ["*"])
        ],
        # ConverseStream on a foundation model (AWS-owned, no account; any Region, for a cross-Region
        # inference profile's destinations) or this account's inference profiles in this Region.
        "bedrock-runtime": [
            (
                "StreamFromModelsAndThisAccountsInferenceProfiles",
                ["bedrock:InvokeModelWithResponseStream"],
                [
                    f"arn:{stack.partition}:bedrock:*::foundation-model/*",
                    f"{here('bedrock')}:inference-profile/*",
                ],
            )
        ],
    }
    grants["ecr.dkr"] = grants["ecr.api"]
    if service not in grants:
        raise ValueError(
            f"no endpoint policy chosen for interface endpoint {service!r}: add one to network.py"
        )
    return [
        iam.PolicyStatement(
            sid=sid,
            principals=[iam.AnyPrincipal()],
            actions=actions,
            resources=resources,
            conditions={"StringEquals": {"aws:PrincipalAccount": Aws.ACCOUNT_ID}},
        )
        for sid, actions, resources in grants[service]
    ]
