"""What the VPC endpoints let through: the AWS-owned S3 objects a route reads through the gateway endpoint,
and each interface endpoint's policy."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import Aws, Fn, Stack, Token
from aws_cdk import aws_iam as iam
from constructs import Construct

# Interface endpoints whose service takes no endpoint policy: the `ecs` endpoint does, `ecs-agent` and
# `ecs-telemetry` do not (awsdocs/amazon-ecs-developer-guide issue #55; the ECS guide's "Creating a VPC
# endpoint policy" section covers `ecs` only). CreateVpcEndpoint refuses a policy for such a service.
# "VPC endpoint policies are not supported for Amazon EKS" (EKS guide, security/security-eks.adoc at 4d52b4d,
# vpc-interface-endpoints), which names eks and eks-auth; that eks-auth refuses one too is UNVERIFIED.
NO_ENDPOINT_POLICY = frozenset({"ecs-agent", "ecs-telemetry", "eks", "eks-auth"})


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


def cloudformation_responses(scope: Construct) -> str:
    """The objects of the AWS-owned bucket a custom resource's handler answers CloudFormation in: its response
    URL is presigned there, so a handler in the VPC writes through the S3 gateway endpoint. "Region names
    don't contain dashes" in its name (CloudFormation User Guide, "Access CloudFormation using an interface
    endpoint (AWS PrivateLink)"; CfnCustomResource's docstring in aws-cdk-lib 2.275 points there)."""
    stack = Stack.of(scope)
    region = stack.region
    compact = Fn.join("", Fn.split("-", region)) if Token.is_unresolved(region) else region.replace("-", "")
    return f"arn:{stack.partition}:s3:::cloudformation-custom-resource-response-{compact}/*"


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
        # The EKS route's callers (routes/eks/network.py; docs/eks.md, "Air-gapped: the network and Karpenter"):
        # Karpenter's AMI parameters (AWS-owned) and queue, the provider framework's Invoke and GetFunction, the
        # load balancer controller's target group.
        "ssm": [
            (
                "ReadEksAmiParameters",
                ["ssm:GetParameter"],
                [f"arn:{stack.partition}:ssm:{stack.region}::parameter/aws/service/eks/optimized-ami/*"],
            )
        ],
        "sqs": [
            (
                "ReadThisAccountsQueues",
                ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
                [f"{here('sqs')}:*"],
            )
        ],
        "lambda": [
            (
                "InvokeThisAccountsFunctions",
                ["lambda:GetFunction", "lambda:InvokeFunction"],
                [f"{here('lambda')}:function:*"],
            )
        ],
        "elasticloadbalancing": [
            ("DescribeNoResource", ["elasticloadbalancing:Describe*"], ["*"]),
            (
                "TargetsOfThisAccountsTargetGroups",
                ["elasticloadbalancing:DeregisterTargets", "elasticloadbalancing:RegisterTargets"],
                [f"{here('elasticloadbalancing')}:targetgroup/*"],
            ),
        ],
    }
    grants["ecr.dkr"] = grants["ecr.api"]
    if service not in grants:
        raise ValueError(
            f"no endpoint policy chosen for interface endpoint {service!r}: add one to network.py"
        )
    return [this_accounts(sid, actions, resources) for sid, actions, resources in grants[service]]


def this_accounts(sid: str, actions: Sequence[str], resources: Sequence[str]) -> iam.PolicyStatement:
    """One statement of an interface endpoint's policy: `actions` on `resources`, for this account's principals
    only."""
    return iam.PolicyStatement(
        sid=sid,
        principals=[iam.AnyPrincipal()],
        actions=list(actions),
        resources=list(resources),
        conditions={"StringEquals": {"aws:PrincipalAccount": Aws.ACCOUNT_ID}},
    )
