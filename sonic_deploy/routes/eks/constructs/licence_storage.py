"""The EBS CSI driver (the aws-ebs-csi-driver EKS add-on) that gives the air-gapped licence proxy its volume
(manifests_licence.py), on a cluster the stack makes; an existing cluster has its own (preflight checks)."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_eks as eks_l1
from aws_cdk import aws_iam as iam
from constructs import Construct

from sonic_deploy.constructs.findings import acknowledge, acknowledge_compliance, as_nag_prints
from sonic_deploy.routes.eks.constructs.add_on_policies import pod_identity_role

ADD_ON = "aws-ebs-csi-driver"
# The add-on's controller service account (EKS User Guide, storage/ebs-csi.adoc at 4d52b4d).
CONTROLLER_SERVICE_ACCOUNT = "ebs-csi-controller-sa"
# The tag the driver puts on every volume it creates, which its example policy keys creation and deletion on
# (kubernetes-sigs/aws-ebs-csi-driver@050d130, docs/example-iam-policy.json).
CLUSTER_TAG = "ebs.csi.aws.com/cluster"


class EbsCsiDriver(Construct):
    """The add-on with a Pod Identity role that may create, attach, resize and delete only the volumes the
    driver tags as its own (attaching them to any node): the example policy's volume statements, narrowed by
    that tag, without its snapshot ones."""

    def __init__(self, scope: Construct, construct_id: str, *, cluster_name: str, namespace: str) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        volumes = stack.format_arn(service="ec2", resource="volume", resource_name="*")
        instances = stack.format_arn(service="ec2", resource="instance", resource_name="*")
        self.role = pod_identity_role(
            self,
            "Role",
            description="the EBS CSI driver's controller: the licence proxy's volume",
            cluster=cluster_name,
            namespace=namespace,
            accounts=[CONTROLLER_SERVICE_ACCOUNT],
        )
        ours = {"StringEquals": {f"aws:RequestTag/{CLUSTER_TAG}": "true"}}
        tagged = {"StringEquals": {f"ec2:ResourceTag/{CLUSTER_TAG}": "true"}}
        for actions, resources, conditions in (
            (
                [
                    "ec2:DescribeAvailabilityZones",
                    "ec2:DescribeInstances",
                    "ec2:DescribeTags",
                    "ec2:DescribeVolumes",
                    "ec2:DescribeVolumesModifications",
                    "ec2:DescribeVolumeStatus",
                ],
                ["*"],
                None,
            ),
            (["ec2:CreateVolume"], [volumes], ours),
            (["ec2:CreateTags"], [volumes], {"StringEquals": {"ec2:CreateAction": "CreateVolume"}}),
            # IAM authorises each resource of a call alone: the driver's volumes, any node it lands on.
            (
                ["ec2:AttachVolume", "ec2:DetachVolume", "ec2:ModifyVolume", "ec2:DeleteVolume"],
                [volumes],
                tagged,
            ),
            (["ec2:AttachVolume", "ec2:DetachVolume"], [instances], None),
        ):
            self.role.add_to_principal_policy(
                iam.PolicyStatement(actions=actions, resources=resources, conditions=conditions)
            )
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            reason="the EBS CSI driver's Describe calls: EC2 Describe* has no resource-level permission "
            "(Service Authorization Reference)",
        )
        acknowledge(
            self.role,
            f"AwsSolutions-IAM5[Resource::{as_nag_prints(volumes)}]",
            f"AwsSolutions-IAM5[Resource::{as_nag_prints(instances)}]",
            reason="the volumes the driver makes get ids at run time: creation needs its cluster tag on the "
            "request, resizing and deletion that tag on the volume; attaching names the node it lands on",
        )
        acknowledge_compliance(
            self.role,
            "IAMNoInlinePolicy",
            reason="the EBS CSI driver's volume statements (its project's example policy, without snapshots), "
            "inline: they live and go with the role",
        )
        self.add_on = eks_l1.CfnAddon(
            self,
            "AddOn",
            addon_name=ADD_ON,
            cluster_name=cluster_name,
            pod_identity_associations=[
                eks_l1.CfnAddon.PodIdentityAssociationProperty(
                    role_arn=self.role.role_arn, service_account=CONTROLLER_SERVICE_ACCOUNT
                )
            ],
        )
