"""Self-managed Karpenter's AWS side: the GPU nodes' role, instance profile and access entry, the controller's
role (Pod Identity) and policy, the interruption queue and its rules, and the two Helm releases (CRDs,
controller). The controller's policy is karpenter_policy.py's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsii
from aws_cdk import Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sqs as sqs
from aws_cdk.interfaces import aws_events as events_refs
from constructs import Construct

from sonic_deploy.constructs.encryption import allow_use_through
from sonic_deploy.constructs.findings import acknowledge
from sonic_deploy.routes.eks.charts import KARPENTER, KARPENTER_CRD, KARPENTER_VERSION, chart_source
from sonic_deploy.routes.eks.config import EksMirrorConfig
from sonic_deploy.routes.eks.constructs.karpenter_policy import WILDCARDS, controller_statements

# The pins, the newest release's (charts.py: branch release-v1.14.1, not tag v1.14.1), published to
# public.ecr.aws/karpenter by hack/release/common.sh. 1.13 is the first for Kubernetes 1.36 (compatibility.md).
OLDEST_VERSION = (1, 13)
SERVICE_ACCOUNT = "karpenter"
# AWS's managed policies for a node (EKS guide, security/iam-reference/create-node-role.adoc at 4d52b4d), less
# AmazonSSMManagedInstanceCore: the permissions boundary cuts its Session Manager actions (docs/deploy.md).
NODE_POLICIES = ("AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly")
CNI_POLICY = "AmazonEKS_CNI_Policy"
# What the interruption controller parses (pkg/controllers/interruption/messages/*/parser.go at 1d92708): source,
# detail-type and, where the parser drops the rest, the detail it keeps. One rule each, as the reference has.
INTERRUPTION_EVENTS: dict[str, tuple[str, str, dict[str, Any] | None]] = {
    "SpotInterruption": ("aws.ec2", "EC2 Spot Instance Interruption Warning", None),
    "RebalanceRecommendation": ("aws.ec2", "EC2 Instance Rebalance Recommendation", None),
    "InstanceStateChange": (
        "aws.ec2",
        "EC2 Instance State-change Notification",
        {"state": ["stopping", "stopped", "shutting-down", "terminated"]},
    ),
    "ScheduledChange": (
        "aws.health",
        "AWS Health Event",
        {"service": ["EC2"], "eventTypeCategory": ["scheduledChange"]},
    ),
    "CapacityReservationInterruption": (
        "aws.ec2",
        "EC2 Capacity Reservation Instance Interruption Warning",
        None,
    ),
}


@jsii.implements(events.IRuleTarget)
class _QueueTarget:
    """A target that only names the queue: the queue policy is KarpenterController's own, one statement for all
    rules (CDK's SqsQueue target adds one per rule, and kms:Encrypt and ReEncrypt* EventBridge does not need)."""

    def __init__(self, queue: sqs.IQueue) -> None:
        self._queue = queue

    def bind(self, rule: events_refs.IRuleRef, id: str | None = None) -> events.RuleTargetConfig:
        return events.RuleTargetConfig(arn=self._queue.queue_arn)


class KarpenterController(Construct):
    """Karpenter installed by us on `cluster`, running on the nodes `system_node_selector` picks (never on
    nodes it launches), with its role through Pod Identity (no OIDC provider, no IRSA annotation).

    Exposes `node_role`, `instance_profile` (the EC2NodeClass's `spec.instanceProfile`), `access_entry`,
    `queue`, `rules`, `controller_role`, `launch_policy`, `integration_policy`, `pod_identity`, `crd_chart` and
    `chart`. NodePool and EC2NodeClass manifests must depend on `chart`: it comes after the CRDs and waits for
    the controller."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        cluster_name: str,
        key: kms.IKey,
        system_node_selector: Mapping[str, str],
        vpc_cni_uses_node_role: bool,
        isolated_vpc: bool = False,
        chart_version: str = KARPENTER_VERSION,
        namespace: str = "kube-system",
        mirror: EksMirrorConfig | None = None,
    ) -> None:
        """`cluster_name`: the cluster's name as a plain string (IAM condition keys carry it, and a key cannot be
        a token). `key` encrypts the interruption queue. `vpc_cni_uses_node_role`: True unless the vpc-cni add-on
        has a Pod Identity (or IRSA) role of its own; then the node role gets AmazonEKS_CNI_Policy, which aws-node
        on Karpenter's nodes needs for their pod IPs (create-node-role.adoc:22 at 4d52b4d). `mirror`: both
        charts and the controller's image from your ECR (charts.py), which lists them for KARPENTER_VERSION.
        `isolated_vpc`: no egress (air-gapped), the chart's settings.isolatedVPC: no pricing API, no
        instance-profile clean-up."""
        super().__init__(scope, construct_id)
        if Token.is_unresolved(cluster_name):
            raise ValueError("cluster_name must be the cluster's name as written, not a token")
        if tuple(int(part) for part in chart_version.split(".")[:2]) < OLDEST_VERSION:
            raise ValueError(f"Karpenter {chart_version} is older than 1.13, the first for Kubernetes 1.36")
        if mirror is not None and chart_version != KARPENTER_VERSION:
            raise ValueError(f"the mirror holds Karpenter {KARPENTER_VERSION}'s image, not {chart_version}'s")
        self._mirror = mirror
        stack = Stack.of(self)
        self.namespace = namespace
        self.service_account_name = SERVICE_ACCOUNT

        self.node_role = iam.Role(
            self,
            "NodeRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description=f"GPU nodes Karpenter launches in {cluster_name}",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name(name)
                for name in (*NODE_POLICIES, *((CNI_POLICY,) if vpc_cni_uses_node_role else ()))
            ],
        )
        acknowledge(
            self.node_role,
            *(
                f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{name}]"
                for name in (*NODE_POLICIES, CNI_POLICY)
            ),
            reason="AWS's policies for an EKS node (EKS User Guide, 'Amazon EKS node IAM role'), as Karpenter's "
            "reference attaches them; the CNI policy only while vpc-cni has no role of its own",
        )
        # The nodes' profile is the stack's, named in the EC2NodeClass (spec.instanceProfile), not one Karpenter
        # makes from spec.role: IAM has no VPC endpoint (docs/eks.md, section 12), and the controller then
        # needs no IAM writes in either mode.
        self.instance_profile = iam.InstanceProfile(self, "NodeInstanceProfile", role=self.node_role)
        # EC2_LINUX: EKS maps the role to system:nodes itself; such an entry takes no access policy.
        self.access_entry = eks.AccessEntry(
            self,
            "NodeAccess",
            cluster=cluster,
            principal=self.node_role.role_arn,
            access_policies=[],
            access_entry_type=eks.AccessEntryType.EC2_LINUX,
        )

        self.queue, self.rules = self._interruption_queue(key)

        # Pod Identity's trust (EKS guide, pod-id-role, "Setting Conditions"): the session tags EKS sets hold the
        # role to this cluster's karpenter service account.
        self.controller_role = iam.Role(
            self,
            "ControllerRole",
            description=f"Karpenter's controller in {cluster_name} ({namespace}/{SERVICE_ACCOUNT})",
            assumed_by=iam.SessionTagsPrincipal(
                iam.ServicePrincipal(
                    "pods.eks.amazonaws.com",
                    conditions={
                        "StringEquals": {
                            "aws:RequestTag/eks-cluster-name": cluster_name,
                            "aws:RequestTag/kubernetes-namespace": namespace,
                            "aws:RequestTag/kubernetes-service-account": SERVICE_ACCOUNT,
                        }
                    },
                )
            ),
        )
        # Two policies, as the reference splits its own: one managed policy holds at most 6,144 characters (IAM
        # quotas), and these statements together come to about 6,200 once the ARNs are filled in.
        launch, integration = controller_statements(
            stack, cluster_name, self.node_role, self.queue, key, isolated_vpc=isolated_vpc
        )
        self.launch_policy = iam.ManagedPolicy(
            self,
            "LaunchPolicy",
            description=f"Karpenter in {cluster_name}: launch, tag and end its own nodes",
            roles=[self.controller_role],
            statements=launch,
        )
        self.integration_policy = iam.ManagedPolicy(
            self,
            "IntegrationPolicy",
            description=f"Karpenter in {cluster_name}: its node role, discovery, its queue",
            roles=[self.controller_role],
            statements=integration,
        )
        allow_use_through(key, "sqs")
        acknowledge(
            self.integration_policy,
            "AwsSolutions-IAM5[Resource::*]",
            reason="ec2:Describe* (held to this Region) and, outside an isolated VPC, pricing:GetProducts and "
            "iam:ListInstanceProfiles have no resource type to scope to",
        )
        for policy in (self.launch_policy, self.integration_policy):
            acknowledge(
                policy,
                *(f"AwsSolutions-IAM5[{wildcard}]" for wildcard in WILDCARDS),
                reason="Karpenter names what it creates at run time: each statement on these holds it to resources "
                "tagged for this cluster (kubernetes.io/cluster/<name> owned, karpenter.sh/nodepool or "
                "karpenter.k8s.aws/ec2nodeclass), to AWS's own AMIs and EKS parameters, or to this Region",
            )
        # Pod Identity rather than eks.ServiceAccount(identity_type=POD_IDENTITY): that one "would create" the Pod
        # Identity Agent add-on (aws_eks_v2 IdentityType docstring), which an existing cluster already has,
        # and a ServiceAccount object the chart makes itself.
        self.pod_identity = eks.CfnPodIdentityAssociation(
            self,
            "PodIdentity",
            cluster_name=cluster_name,
            namespace=namespace,
            service_account=SERVICE_ACCOUNT,
            role_arn=self.controller_role.role_arn,
        )

        self.crd_chart, self.chart = self._charts(
            cluster, cluster_name, chart_version, system_node_selector, isolated_vpc
        )
        for needed in (
            self.pod_identity,
            self.launch_policy,
            self.integration_policy,
            self.access_entry,
            # The queue's policy (EventBridge may send): the chart's values name the queue, which orders it.
            self.queue.node.find_child("Policy"),
            *self.rules,
        ):
            self.chart.node.add_dependency(needed)

    def _interruption_queue(self, key: kms.IKey) -> tuple[sqs.Queue, list[events.Rule]]:
        """The queue Karpenter reads EC2's and AWS Health's notices from, and the rules that fill it."""
        queue = sqs.Queue(
            self,
            "InterruptionQueue",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=key,
            enforce_ssl=True,
            # As the reference: a notice older than five minutes is past acting on.
            retention_period=Duration.seconds(300),
            removal_policy=RemovalPolicy.DESTROY,
        )
        acknowledge(
            queue,
            "AwsSolutions-SQS3",
            reason="Karpenter deletes every notice it reads, acted on or not; one it cannot read expires in "
            "300 s, and a dead-letter queue would keep stale notices nobody replays",
        )
        target = _QueueTarget(queue)
        rules = [
            events.Rule(
                self,
                f"{name}Rule",
                description=f"{detail_type} into Karpenter's interruption queue",
                event_pattern=events.EventPattern(source=[source], detail_type=[detail_type], detail=detail),
                targets=[target],
            )
            for name, (source, detail_type, detail) in INTERRUPTION_EVENTS.items()
        ]
        account = Stack.of(self).account
        queue.add_to_resource_policy(
            iam.PolicyStatement(
                sid="TheInterruptionRulesSend",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["sqs:SendMessage"],
                resources=[queue.queue_arn],
                conditions={"ArnEquals": {"aws:SourceArn": [rule.rule_arn for rule in rules]}},
            )
        )
        # The reference lets sqs.amazonaws.com send too (since aws/karpenter-provider-aws bde080e, no reason
        # given); held here to this account.
        queue.add_to_resource_policy(
            iam.PolicyStatement(
                sid="SqsOnThisAccountsBehalfSends",
                principals=[iam.ServicePrincipal("sqs.amazonaws.com")],
                actions=["sqs:SendMessage"],
                resources=[queue.queue_arn],
                conditions={"StringEquals": {"aws:SourceAccount": account}},
            )
        )
        # EventBridge encrypts what it sends with the queue's key (SQS Developer Guide, "Key management"); CDK's
        # SqsQueue target also conditions this on the account (@aws-cdk/aws-events:eventsTargetQueueSameAccount).
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="EventBridgeEncryptsForKarpenter",
                principals=[iam.ServicePrincipal("events.amazonaws.com")],
                actions=["kms:GenerateDataKey", "kms:Decrypt"],
                resources=["*"],
                conditions={"StringEquals": {"aws:SourceAccount": account}},
            )
        )
        return queue, rules

    def _charts(
        self,
        cluster: eks.ICluster,
        cluster_name: str,
        chart_version: str,
        system_node_selector: Mapping[str, str],
        isolated_vpc: bool,
    ) -> tuple[eks.HelmChart, eks.HelmChart]:
        """karpenter-crd, then karpenter. Helm installs a chart's crds/ once and never upgrades them; Karpenter
        recommends its CRD chart for that (website/content/en/v1.14/upgrading/upgrade-guide.md, "CRD Upgrades").
        The controller's first install finds the CRDs present and skips its own copies (Helm docs, "Custom
        Resource Definitions"). The kubectl Lambda logs in to public.ecr.aws to pull both: its role has
        AmazonElasticContainerRegistryPublicReadOnly in the aws partition (aws-cdk-lib 2.275,
        aws-eks-v2/lib/kubectl-provider.js); or to the mirror's ECR (docs/eks.md, "The mirror")."""
        crds, source = chart_source(KARPENTER_CRD, self._mirror), chart_source(KARPENTER, self._mirror)
        # The one image is the controller's (charts.py), under `controller` with the resources below.
        assert set(source.values) <= {"controller"}
        crd_chart = eks.HelmChart(
            self,
            "CrdChart",
            cluster=cluster,
            chart="karpenter-crd",
            repository=crds.repository,
            version=chart_version,
            release="karpenter-crd",
            namespace=self.namespace,
            create_namespace=False,
        )
        chart = eks.HelmChart(
            self,
            "Chart",
            cluster=cluster,
            chart="karpenter",
            repository=source.repository,
            version=chart_version,
            release="karpenter",
            namespace=self.namespace,
            create_namespace=False,
            # Ready before the deploy goes on: NodePools applied after it have a controller to act on them.
            wait=True,
            values={
                # isolatedVPC: "assume we can't reach AWS services which don't have a VPC endpoint" (pricing,
                # IAM: charts/karpenter/values.yaml, pkg/controllers/controllers.go:119-123 at 1d92708).
                "settings": {
                    "clusterName": cluster_name,
                    "interruptionQueue": self.queue.queue_name,
                    **({"isolatedVPC": True} if isolated_vpc else {}),
                },
                # The chart's own service account, named for the Pod Identity association; no role annotation.
                "serviceAccount": {"create": True, "name": SERVICE_ACCOUNT},
                "replicas": 2,
                "nodeSelector": {"kubernetes.io/os": "linux", **system_node_selector},
                # As Karpenter's getting-started (scripts/step08-apply-helm-chart.sh): requests equal limits.
                "controller": {
                    **source.values.get("controller", {}),
                    "resources": {
                        "requests": {"cpu": "1", "memory": "1Gi"},
                        "limits": {"cpu": "1", "memory": "1Gi"},
                    },
                },
            },
        )
        chart.node.add_dependency(crd_chart)
        return crd_chart, chart
