"""What the cluster's controllers may call in AWS: the statements of ClusterAddOns' Pod Identity roles,
written by us for what the route uses, each with the source that says the controller calls it.

Sources by commit: kubernetes-sigs/aws-load-balancer-controller@225f445 (v3.5.0), kedacore/keda@8b4f083
(v2.20.2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import ArnFormat, CfnJson, CfnResource, Stack, Token
from aws_cdk import aws_iam as iam
from constructs import Construct

from sonic_deploy.constructs.findings import acknowledge_custom_resource_handler

# CDK's one provider per stack behind every CfnJson, at the stack's root.
CFN_UTILS_PROVIDER = "AWSCDKCfnUtilsProviderCustomResourceProvider"

# The controller's reads for a TargetGroupBinding of an existing IP target group: the webhooks read the
# group's type, VPC and protocol (webhooks/elbv2/targetgroupbinding_mutator.go, _validator.go), the binding
# reads target health (pkg/targetgroupbinding/targets_manager.go:212-220) and the VPC's CIDRs
# (resource_manager.go:727), and `networking` rules read ENIs, instances and groups
# (pkg/networking/networking_manager.go:548-640). A subset of docs/install/iam_policy.json's read statement:
# left out are its reads for building load balancers (addresses, internet gateways, route tables, COIP and
# IPAM pools, VPC peering, certificates, WAF, Shield, Cognito).
LOAD_BALANCER_CONTROLLER_READS = (
    "ec2:DescribeAccountAttributes",
    "ec2:DescribeAvailabilityZones",
    "ec2:DescribeInstances",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSubnets",
    "ec2:DescribeTags",
    "ec2:DescribeVpcs",
    "elasticloadbalancing:DescribeListeners",
    "elasticloadbalancing:DescribeLoadBalancers",
    "elasticloadbalancing:DescribeTags",
    "elasticloadbalancing:DescribeTargetGroupAttributes",
    "elasticloadbalancing:DescribeTargetGroups",
    "elasticloadbalancing:DescribeTargetHealth",
)

# KEDA's aws-cloudwatch scaler makes one call, GetMetricData (pkg/scalers/aws_cloudwatch_scaler.go:25, 285);
# it has no resource type or condition key (Service Authorization Reference, Amazon CloudWatch), so the
# metrics namespace cannot narrow it.
KEDA_CLOUDWATCH_ACTIONS = ("cloudwatch:GetMetricData",)


def pod_identity_role(
    scope: Construct,
    construct_id: str,
    *,
    description: str,
    cluster: str,
    namespace: str,
    accounts: Sequence[str],
) -> iam.Role:
    """A role EKS Pod Identity hands only to `accounts` of `namespace` on `cluster`: the service principal
    `pods.eks.amazonaws.com` with sts:AssumeRole and sts:TagSession (awsdocs/amazon-eks-user-guide@4d52b4d,
    manage-access/aws-access/service-accounts.adoc:166-170), on the session tags the agent sets ("pod-id-abac")."""
    principal = iam.ServicePrincipal("pods.eks.amazonaws.com").with_session_tags()
    return iam.Role(
        scope,
        construct_id,
        assumed_by=principal.with_conditions(
            {
                "StringEquals": {
                    "aws:RequestTag/eks-cluster-name": cluster,
                    "aws:RequestTag/kubernetes-namespace": namespace,
                    "aws:RequestTag/kubernetes-service-account": list(accounts),
                }
            }
        ),
        description=description,
    )


def load_balancer_controller_statements(
    scope: Construct, *, cluster_name: str, vpc_id: str, target_group_arns: Sequence[str]
) -> list[iam.PolicyStatement]:
    """The load balancer controller's statements: reads, targets in/out of the target groups named (or any
    of the account's in the Region), ingress rules on the cluster's tagged groups in the VPC.

    No elasticloadbalancing:Create*, Modify*, Delete*, AddTags, SetSecurityGroups, no ec2:CreateSecurityGroup:
    the route's NLB, listener and target group are the stack's (docs/eks.md, section 3), and a Service of
    type LoadBalancer or an Ingress the controller were asked to build would fail on AccessDenied."""
    stack = Stack.of(scope)
    target_groups = list(target_group_arns) or [
        stack.format_arn(
            service="elasticloadbalancing",
            resource="targetgroup",
            resource_name="*/*",
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )
    ]
    vpc_arn = stack.format_arn(
        service="ec2", resource="vpc", resource_name=vpc_id, arn_format=ArnFormat.SLASH_RESOURCE_NAME
    )
    return [
        iam.PolicyStatement(
            sid="ReadTargetGroupsAndTheNetwork",
            actions=list(LOAD_BALANCER_CONTROLLER_READS),
            resources=["*"],
        ),
        iam.PolicyStatement(
            # docs/install/iam_policy.json's RegisterTargets statement, on the stack's groups when named.
            sid="RegisterPodsInTheTargetGroup",
            actions=["elasticloadbalancing:RegisterTargets", "elasticloadbalancing:DeregisterTargets"],
            resources=target_groups,
        ),
        iam.PolicyStatement(
            # Only for a binding with `networking` (networking_manager.go:100-121: none, no call): the ENI's
            # group tagged kubernetes.io/cluster/<name> (resolveEndpointSGForENI, :548-588), in this VPC.
            sid="OpenTheClustersTaggedGroupsToTheLoadBalancer",
            actions=["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"],
            resources=[security_groups_arn(scope)],
            conditions={
                "Null": _tag_key_condition(scope, f"aws:ResourceTag/kubernetes.io/cluster/{cluster_name}"),
                "ArnEquals": {"ec2:Vpc": vpc_arn},
            },
        ),
    ]


def security_groups_arn(scope: Construct) -> str:
    """Every security group of the stack's account and Region: which group the controller opens is the ENI's
    tagged group, known at run time (OpenTheClustersTaggedGroupsToTheLoadBalancer's conditions hold it)."""
    return Stack.of(scope).format_arn(
        service="ec2", resource="security-group", resource_name="*", arn_format=ArnFormat.SLASH_RESOURCE_NAME
    )


def keda_statements() -> list[iam.PolicyStatement]:
    """KEDA's operator: CloudWatch reads for the aws-cloudwatch triggers, nothing else."""
    return [
        iam.PolicyStatement(
            sid="ReadScalingMetrics",
            actions=list(KEDA_CLOUDWATCH_ACTIONS),
            resources=["*"],
        )
    ]


def _tag_key_condition(scope: Construct, key: str) -> Mapping[str, Any] | CfnJson:
    """{key: "false"} (the tag is present). A condition key holding a token (a new cluster's name) cannot be
    a JSON key until deploy, so CfnJson resolves it then (as aws_eks_v2's ServiceAccount does for IRSA)."""
    if Token.is_unresolved(key):
        condition = CfnJson(scope, "ClusterTagCondition", value={key: "false"})
        _acknowledge_cfn_utils_provider(Stack.of(scope))
        return condition
    return {key: "false"}


def _acknowledge_cfn_utils_provider(stack: Stack) -> None:
    """The Lambda function behind CfnJson (CDK's one provider per stack, at its root)."""
    provider = stack.node.try_find_child(CFN_UTILS_PROVIDER)
    handler = provider.node.try_find_child("Handler") if provider is not None else None
    role = provider.node.try_find_child("Role") if provider is not None else None
    assert isinstance(handler, CfnResource), f"{CFN_UTILS_PROVIDER} has no handler: has CDK renamed it?"
    if handler.get_metadata("checkov"):
        return  # acknowledged for an earlier CfnJson of the stack
    if isinstance(role, CfnResource):
        # CDK's explicit DependsOn repeats what the function's GetAtt of the role already orders
        # (cfn-lint W3005).
        handler.remove_dependency(role)
    acknowledge_custom_resource_handler(
        handler,
        outside_vpc="it only turns a JSON value holding deploy-time tokens (the cluster's name as a condition "
        "key) into an object, calls no AWS API and needs nothing in the VPC",
    )
