"""Karpenter's controller policy: ours, written after Karpenter's CloudFormation reference for the version
pinned (aws/karpenter-provider-aws@1d92708, website/content/en/v1.14/getting-started/
getting-started-with-karpenter/cloudformation.yaml), narrowed where Karpenter's source shows it needs less.
Every create, tag and delete is held to the tags Karpenter writes on what it makes for this cluster.

Narrower than the reference: SSM to EKS's AMI parameters, the account's own subnets, groups, reservations and
placement groups (RAM-shared ones from another account would be refused), no zonal-shift statement
(`settings.enableZonalShift` stays false, charts/karpenter/values.yaml), and no IAM writes: the EC2NodeClass
names the stack's instance profile (spec.instanceProfile), so Karpenter makes none (docs/eks.md, section 12)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Aws, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs

# What Karpenter reads to find subnets, groups, images and offerings (the reference's ResourceDiscoveryPolicy).
DISCOVERY = (
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeImages",
    "ec2:DescribeInstances",
    "ec2:DescribeInstanceStatus",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeLaunchTemplates",
    "ec2:DescribePlacementGroups",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSpotPriceHistory",
    "ec2:DescribeSubnets",
)


# Wildcards in the controller policy's resources, as cdk-nag names them.
WILDCARDS = (
    "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>::image/*",
    "Resource::arn:<AWS::Partition>:ec2:<AWS::Region>::snapshot/*",
    "Resource::arn:<AWS::Partition>:ssm:<AWS::Region>::parameter/aws/service/eks/optimized-ami/*",
    "Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:instance-profile/*",
    *(
        f"Resource::arn:<AWS::Partition>:ec2:<AWS::Region>:<AWS::AccountId>:{kind}/*"
        for kind in (
            "security-group",
            "subnet",
            "capacity-reservation",
            "placement-group",
            "fleet",
            "instance",
            "volume",
            "network-interface",
            "launch-template",
            "spot-instances-request",
        )
    ),
)


def controller_statements(
    stack: Stack,
    cluster_name: str,
    node_role: iam.IRole,
    queue: sqs.IQueue,
    key: kms.IKey,
    *,
    isolated_vpc: bool = False,
) -> tuple[list[iam.PolicyStatement], list[iam.PolicyStatement]]:
    """Karpenter's permissions, each scoped as far as its resource types and the tags Karpenter writes allow:
    those on EC2's launches, and the rest. `isolated_vpc`: the chart's settings.isolatedVPC, under which
    Karpenter calls neither the pricing API nor IAM."""
    region, account = Aws.REGION, Aws.ACCOUNT_ID

    def ec2(*kinds: str, owner: str = account) -> list[str]:
        return [f"arn:{Aws.PARTITION}:ec2:{region}:{owner}:{kind}/*" for kind in kinds]

    owned = f"kubernetes.io/cluster/{cluster_name}"
    created = ec2(
        "fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request"
    )
    request_tags = {f"aws:RequestTag/{owned}": "owned", "aws:RequestTag/eks:eks-cluster-name": cluster_name}
    its_own = {
        "StringEquals": {f"aws:ResourceTag/{owned}": "owned"},
        "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
    }
    profiles = [f"arn:{Aws.PARTITION}:iam::{account}:instance-profile/*"]

    def allow(
        sid: str, actions: Sequence[str], resources: Sequence[str], **conditions: Any
    ) -> iam.PolicyStatement:
        return iam.PolicyStatement(
            sid=sid, actions=list(actions), resources=list(resources), conditions=conditions or None
        )

    launch = ("ec2:RunInstances", "ec2:CreateFleet")
    launching = [
        # AMIs and their snapshots are AWS's (no account in their ARNs); the rest of the launch is ours.
        allow(
            "LaunchFromImagesSubnetsAndGroups",
            launch,
            [
                *ec2("image", "snapshot", owner=""),
                *ec2("security-group", "subnet", "capacity-reservation", "placement-group"),
            ],
        ),
        allow("LaunchFromItsOwnTemplates", launch, ec2("launch-template"), **its_own),
        allow(
            "CreateOnlyTaggedForThisCluster",
            (*launch, "ec2:CreateLaunchTemplate"),
            created,
            StringEquals=request_tags,
            StringLike={"aws:RequestTag/karpenter.sh/nodepool": "*"},
        ),
        allow(
            "TagWhatItCreates",
            ["ec2:CreateTags"],
            created,
            StringEquals={
                **request_tags,
                "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
            },
            StringLike={"aws:RequestTag/karpenter.sh/nodepool": "*"},
        ),
        allow(
            "NameItsOwnInstances",
            ["ec2:CreateTags"],
            ec2("instance"),
            **its_own,
            StringEqualsIfExists={"aws:RequestTag/eks:eks-cluster-name": cluster_name},
            **{
                "ForAllValues:StringEquals": {
                    "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                }
            },
        ),
        allow(
            "EndItsOwn",
            ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            ec2("instance", "launch-template"),
            **its_own,
        ),
    ]
    # Outside an isolated VPC the node class's finalizer and garbage collector still read profiles (nodeclass/
    # controller.go:176-206 at 1d92708; none made, none deleted); in one, neither runs (controllers.go:119-123),
    # nor do price look-ups (pricing/pricing.go:193).
    outside_isolated_vpc = [
        allow("ReadInstanceProfiles", ["iam:GetInstanceProfile"], profiles),
        allow("ListInstanceProfiles", ["iam:ListInstanceProfiles"], ["*"]),
        allow("ReadPrices", ["pricing:GetProducts"], ["*"]),
    ]
    return launching, [
        allow(
            "PassOnlyTheNodeRoleToEc2",
            ["iam:PassRole"],
            [node_role.role_arn],
            StringEquals={"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]},
        ),
        *([] if isolated_vpc else outside_isolated_vpc),
        allow("DiscoverInThisRegion", DISCOVERY, ["*"], StringEquals={"aws:RequestedRegion": region}),
        # The reference allows /aws/service/*; Karpenter reads only EKS's AMI parameters for AL2023 (al2023.go:88).
        allow(
            "ReadEksAmiParameters",
            ["ssm:GetParameter"],
            [f"arn:{Aws.PARTITION}:ssm:{region}::parameter/aws/service/eks/optimized-ami/*"],
        ),
        allow(
            "FindThisCluster",
            ["eks:DescribeCluster"],
            [stack.format_arn(service="eks", resource="cluster", resource_name=cluster_name)],
        ),
        allow(
            "ReadTheInterruptionQueue",
            ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
            [queue.queue_arn],
        ),
        allow(
            "DecryptTheQueueThroughSqs",
            ["kms:Decrypt"],
            [key.key_arn],
            StringEquals={"kms:ViaService": f"sqs.{region}.amazonaws.com"},
        ),
    ]
