"""Acknowledged findings of the rule packs and scanners run over the templates (`make compliance`, and the
tests): cdk-nag's AwsSolutions, NIST 800-53 rev 5, HIPAA Security and PCI DSS 3.2.1 packs, checkov and
cfn-lint. Each acknowledgement sits next to the resource it concerns and says why the finding does not
apply, or what remains and why it is accepted."""

from __future__ import annotations

from typing import Any

from aws_cdk import Acknowledgment, Aws, CfnResource, Stack, Validations
from constructs import IConstruct

# cdk-nag's compliance packs, by the name their findings carry before '::'.
COMPLIANCE_PACKS = ("NIST.800.53.R5", "HIPAA.Security", "PCI.DSS.321")


def acknowledge(scope: IConstruct, *rules: str, reason: str) -> None:
    """AwsSolutions rules as the finding prints them after 'AwsSolutions::', e.g.
    'AwsSolutions-IAM5[Resource::*]'."""
    Validations.of(scope).acknowledge(
        *(Acknowledgment(id=f"AwsSolutions::{rule}", reason=reason) for rule in rules)
    )


def as_nag_prints(arn: str) -> str:
    """An ARN of the stack's partition, Region and account as cdk-nag prints it in a finding: each pseudo
    parameter CDK left a token as <AWS::Name>."""
    for token, name in ((Aws.PARTITION, "Partition"), (Aws.REGION, "Region"), (Aws.ACCOUNT_ID, "AccountId")):
        arn = arn.replace(token, f"<AWS::{name}>")
    return arn


def acknowledge_compliance(scope: IConstruct, *rules: str, reason: str) -> None:
    """Rules of the compliance packs by their name after the pack's, e.g. 'IAMNoInlinePolicy': acknowledged
    in each pack (NIST 800-53 rev 5, HIPAA Security, PCI DSS 3.2.1) that has the rule."""
    Validations.of(scope).acknowledge(
        *(
            Acknowledgment(id=f"{pack}::{pack}-{rule}", reason=reason)
            for pack in COMPLIANCE_PACKS
            for rule in rules
        )
    )


def skip_checkov(resource: IConstruct, *checks: str, reason: str) -> None:
    """A checkov skip on one resource (its `Metadata.checkov.skip`, which checkov reads), for the checks
    named (`CKV_AWS_116`). `resource` is the L1 resource, or an L2 construct whose default child is one."""
    cfn = resource if isinstance(resource, CfnResource) else resource.node.default_child
    assert isinstance(cfn, CfnResource), f"{resource.node.path} has no CloudFormation resource"
    existing = cfn.get_metadata("checkov") or {}
    skips = [*existing.get("skip", []), *({"id": check, "comment": reason} for check in checks)]
    cfn.add_metadata("checkov", {"skip": skips})


def acknowledge_custom_resource_handler(handler: IConstruct, *, outside_vpc: str | None) -> None:
    """The Lambda rules of the compliance packs and checkov on a CloudFormation custom resource's handler,
    each with its reason; `outside_vpc` says why this one runs outside the VPC (None: it runs in the VPC)."""
    reasons = {
        ("LambdaInsideVPC", "CKV_AWS_117"): outside_vpc,
        ("LambdaDLQ", "CKV_AWS_116"): "a CloudFormation custom resource's handler, invoked asynchronously by "
        "CloudFormation, which waits for its answer at a presigned URL: an error is answered FAILED, a lost "
        "invocation fails the resource at CloudFormation's timeout, and either way the deploy fails and rolls "
        "back, so a dead-letter queue would keep events (with their one-use response URLs) nobody replays",
        (
            "LambdaConcurrency",
            "CKV_AWS_115",
        ): "only CloudFormation invokes it, a few times per deploy, so its "
        "concurrency is bounded already; a function may reserve only what leaves the account 100 unreserved "
        "(Lambda Developer Guide, reserved concurrency), so reserving any fails the deploy in an account whose "
        "quota is still a new account's 10",
    }
    for (rule, check), reason in reasons.items():
        if reason is None:
            continue
        acknowledge_compliance(handler, rule, reason=reason)
        skip_checkov(handler, check, reason=reason)


def ignore_cfn_lint_on(resource: IConstruct, *rules: str, reason: str) -> None:
    """cfn-lint rules ignored on one resource (its `Metadata.cfn-lint.config.ignore_checks`, which cfn-lint
    reads), with the reason beside them. `resource` is the L1 resource, or an L2 whose default child is one."""
    cfn = resource if isinstance(resource, CfnResource) else resource.node.default_child
    assert isinstance(cfn, CfnResource), f"{resource.node.path} has no CloudFormation resource"
    cfn.add_metadata("cfn-lint", {"config": {"ignore_checks": sorted(rules)}})
    cfn.add_metadata(CFN_LINT_REASONS, dict.fromkeys(rules, reason))


CFN_LINT_REASONS = "sonic-deploy:cfn-lint-reasons"


def ignore_cfn_lint(stack: Stack, *rules: str, reason: str) -> None:
    """cfn-lint rules ignored in the whole template (its `Metadata.cfn-lint.config.ignore_checks`). Only for
    rules about how CDK writes templates, never about what they deploy; `reason` says which."""
    metadata: dict[str, Any] = dict(stack.template_options.metadata or {})
    config = metadata.setdefault("cfn-lint", {"config": {"ignore_checks": []}})["config"]
    config["ignore_checks"] = sorted({*config["ignore_checks"], *rules})
    reasons = metadata.setdefault(CFN_LINT_REASONS, {})
    reasons.update(dict.fromkeys(rules, reason))
    stack.template_options.metadata = metadata


# Actions IAM cannot scope to a resource (the Service Authorization Reference lists no resource type for them,
# https://docs.aws.amazon.com/service-authorization/latest/reference/reference_policies_actions-resources-contextkeys.html):
# the only ones a statement on Resource `*` may hold (tests/compliance/test_invariants.py), unless the
# statement's condition holds it to a resource of the stack (ecs:cluster, ec2:FisTargetArns).
RESOURCELESS_ACTIONS = {
    "ecr:GetAuthorizationToken": "a registry login token, for every repository the role may then pull or push",
    "ecr-public:GetAuthorizationToken": "the same for ECR Public (a public source image)",
    "sts:GetServiceBearerToken": "the bearer token ECR Public's login needs",
    "ecs:DiscoverPollEndpoint": "the ECS agent finding its endpoint before it registers",
    "cloudwatch:PutMetricData": "CloudWatch metrics have no ARN (a namespace condition scopes it where set)",
    "ec2:DescribeDhcpOptions": "EC2 Describe calls take no resource",
    "ec2:DescribeNetworkInterfaces": "EC2 Describe calls take no resource",
    "ec2:DescribeSecurityGroups": "EC2 Describe calls take no resource",
    "ec2:DescribeSubnets": "EC2 Describe calls take no resource",
    "ec2:DescribeVpcs": "EC2 Describe calls take no resource",
    "ec2:DescribeInstances": "EC2 Describe calls take no resource",
    "ec2:DescribeManagedPrefixLists": "EC2 Describe calls take no resource",
    "ec2:DescribeTags": "EC2 Describe calls take no resource",
    "ec2:DescribeVolumes": "EC2 Describe calls take no resource",
    "ec2:DescribeVolumesModifications": "EC2 Describe calls take no resource",
    "ec2:DescribeVolumeStatus": "EC2 Describe calls take no resource",
    "ecs:DescribeTaskDefinition": "task definitions are read by family, which IAM does not scope",
    "servicediscovery:DiscoverInstances": "Cloud Map discovery takes no resource",
    "ec2:DescribeVpcEndpoints": "EC2 Describe calls take no resource",
    "autoscaling:DescribeAutoScalingGroups": "Auto Scaling Describe calls take no resource",
    "tag:GetResources": "the Resource Groups Tagging API takes no resource (FIS resolves its targets by tag)",
    "logs:CreateLogDelivery": "log delivery set-up takes no resource (FIS's experiment logs)",
    "transcribe:StartStreamTranscriptionWebSocket": "streaming transcription takes no resource (the probe "
    "task's turn hop, [probe] turn_hops)",
    # The EKS route's controllers (routes/eks/constructs/karpenter_policy.py, add_on_policies.py).
    "ec2:DescribeAccountAttributes": "EC2 Describe calls take no resource",
    "ec2:DescribeAvailabilityZones": "EC2 Describe calls take no resource",
    "ec2:DescribeCapacityReservations": "EC2 Describe calls take no resource",
    "ec2:DescribeImages": "EC2 Describe calls take no resource",
    "ec2:DescribeInstanceStatus": "EC2 Describe calls take no resource",
    "ec2:DescribeInstanceTypeOfferings": "EC2 Describe calls take no resource",
    "ec2:DescribeInstanceTypes": "EC2 Describe calls take no resource",
    "ec2:DescribeLaunchTemplates": "EC2 Describe calls take no resource",
    "ec2:DescribePlacementGroups": "EC2 Describe calls take no resource",
    "ec2:DescribeSpotPriceHistory": "EC2 Describe calls take no resource",
    "elasticloadbalancing:DescribeListeners": "Elastic Load Balancing Describe calls take no resource",
    "elasticloadbalancing:DescribeLoadBalancers": "Elastic Load Balancing Describe calls take no resource",
    "elasticloadbalancing:DescribeTags": "Elastic Load Balancing Describe calls take no resource",
    "elasticloadbalancing:DescribeTargetGroupAttributes": "Elastic Load Balancing Describe calls take no "
    "resource",
    "elasticloadbalancing:DescribeTargetGroups": "Elastic Load Balancing Describe calls take no resource",
    "elasticloadbalancing:DescribeTargetHealth": "Elastic Load Balancing Describe calls take no resource",
    "iam:ListInstanceProfiles": "the account's instance profiles are listed without a resource (Karpenter "
    "finds its own by tag; reading, tagging and changing one are scoped in their statements)",
    "pricing:GetProducts": "the Price List API takes no resource (Karpenter reads on-demand prices)",
    "cloudwatch:GetMetricData": "a metric read has no resource of ours to name (its only resource type is a "
    "metrics-insights dataset) nor a namespace condition (KEDA's aws-cloudwatch scaler)",
}

# ECS services (and scalable targets) that run fewer than two tasks, by the start of their logical id, and why
# (every other service on the caller's path runs two or more: tests/compliance/test_invariants.py).
SINGLE_TASK_SERVICES = {
    "SonicLicenceProxy": "The licence proxy answers the workers' licence checks, not a caller's request "
    "(UNVERIFIED: how long a worker serves while its proxy is away is Cartesia's to say)",
    "MetricsScraper": "The Prometheus scraper feeds the scaling metric and the dashboards, not a call",
    # GpuFallback: the service and its scalable target.
    "SonicOverflowWorker": "The fallback AZ's overflow workers: none until a first-AZ worker cannot be placed; "
    "the first AZ keeps min_workers (2 or more)",
    "FallbackOverflowTarget": "The overflow workers' scaling: from 0, on the first AZ's shortfall of GPU instances "
    "less the overflow's own tasks",
}

# Stateful resources deleted with the stack on purpose, by the start of their logical id, and why.
DESTROYED_WITH_THE_STACK = {
    "SonicLogs": "The SageMaker endpoint's log group has the endpoint's name: retained, it would stop the next "
    "deploy of the same endpoint (SageMaker's own group name, sonic_endpoint.py)",
    "ProbeImageRepository": "The probe image's repository: every deploy rebuilds the image from the code it "
    "deploys, so nothing in it is worth keeping (probe_image.py)",
    "ProbeBucket": "The probe's runs: samples the runner has already merged into its local summary, expired "
    "after probe.results_retention_days anyway (probe_task.py)",
}
