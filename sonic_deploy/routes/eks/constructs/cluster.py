"""The route's cluster: one the stack makes, or one named in config, with the kubectl Lambda that applies the
route's Kubernetes objects (docs/eks.md, section 2). Either way the Lambda runs in the route's private
subnets and reaches the private endpoint through the cluster security group."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import cast

from aws_cdk import CfnCondition, CfnResource, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk.lambda_layer_kubectl_v36 import KubectlV36Layer
from constructs import Construct, IConstruct, IDependable

from sonic_deploy.constructs.encryption import allow_use_through
from sonic_deploy.constructs.findings import (
    acknowledge,
    acknowledge_compliance,
    acknowledge_custom_resource_handler,
    ignore_cfn_lint_on,
    skip_checkov,
)

# Nodes of the system group carry this label: Karpenter, the controllers, the API server and NATS select it,
# so Karpenter never runs on the nodes it manages (docs/eks.md, section 1).
SYSTEM_NODES = {"sonic-deploy/nodes": "system"}
ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"


class SonicCluster(Construct):
    """`existing`: the name of a cluster to use as it is (with its `security_group_id`); None: a new cluster
    named `name` (a plain string: Karpenter's IAM conditions and tags carry it) at `version`, control plane in `control_plane_subnets`, its `system_nodes` CPU nodes in `node_subnets`,
    secrets encrypted with `key`, every control plane log on, the endpoint private."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        vpc: ec2.IVpc,
        control_plane_subnets: Sequence[ec2.ISubnet],
        node_subnets: Sequence[ec2.ISubnet],
        key: kms.IKey,
        version: str,
        name: str,
        existing: str | None,
        security_group_id: str | None,
        system_instance_type: str,
        system_nodes: int,
        admins: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        # The Lambda calls the cluster endpoint, EKS and STS, and fetches Helm charts: HTTPS out only.
        self.kubectl_security_group = ec2.SecurityGroup(
            self,
            "KubectlSecurityGroup",
            vpc=vpc,
            description="kubectl Lambda: HTTPS to the cluster endpoint, AWS APIs and chart repositories",
            allow_all_outbound=False,
        )
        self.kubectl_security_group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS out")
        layer = KubectlV36Layer(self, "KubectlLayer")
        self._name = existing or name
        self.ready: list[IDependable] = []
        """What every Kubernetes object waits for: the Lambda's access to the cluster."""
        if existing is None:
            self.cluster: eks.ICluster = self._create(
                vpc,
                control_plane_subnets,
                node_subnets,
                key,
                version,
                name,
                layer,
                system_instance_type,
                system_nodes,
            )
        else:
            assert security_group_id is not None  # the config's rules require it with `existing`
            self.cluster = self._import(vpc, node_subnets, existing, security_group_id, layer)
            # Its own nodes, as a new cluster's: the controllers and the CPU pods select them, in the GPU AZ.
            self._system_nodes(self.cluster, node_subnets, system_instance_type, system_nodes)
        # Your operators' kubectl (a new cluster's only: config refuses `admins` with `existing`).
        for index, principal in enumerate(admins):
            eks.AccessEntry(
                self,
                f"Admin{index}",
                cluster=self.cluster,
                principal=principal,
                access_policies=[
                    eks.AccessPolicy.from_access_policy_name(
                        ADMIN_POLICY, access_scope_type=eks.AccessScopeType.CLUSTER
                    )
                ],
            )
        provider = self.cluster.kubectl_provider
        assert provider is not None, "the cluster has no kubectl provider"
        _kubectl_provider_on_the_key(provider, key)

    def _create(
        self,
        vpc: ec2.IVpc,
        control_plane_subnets: Sequence[ec2.ISubnet],
        node_subnets: Sequence[ec2.ISubnet],
        key: kms.IKey,
        version: str,
        name: str,
        layer: KubectlV36Layer,
        system_instance_type: str,
        system_nodes: int,
    ) -> eks.ICluster:
        cluster = eks.Cluster(
            self,
            "Cluster",
            version=eks.KubernetesVersion.of(version),
            cluster_name=name,
            vpc=vpc,
            # The control plane needs subnets in two AZs (EKS guide, create-cluster); the nodes are in one.
            vpc_subnets=[ec2.SubnetSelection(subnets=list(control_plane_subnets))],
            endpoint_access=eks.EndpointAccess.PRIVATE,
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            secrets_encryption_key=key,
            cluster_logging=list(eks.ClusterLoggingTypes),
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=layer,
                private_subnets=list(node_subnets),
                security_groups=[self.kubectl_security_group],
            ),
        )
        # jsii's Python Cluster lacks ICluster's `kubectl_provider_options` (a typing gap; the object has it).
        as_cluster = cast("eks.ICluster", cluster)
        # Secrets envelope encryption: EKS creates a grant on the key at CreateCluster and uses it with the
        # cluster role (EKS User Guide, "Encrypt Kubernetes secrets with KMS"); the key policy names EKS.
        allow_use_through(key, "eks")
        key.grant(cluster.role, "kms:Encrypt", "kms:Decrypt", "kms:DescribeKey", "kms:CreateGrant")
        acknowledge_compliance(
            cluster.role,
            "IAMNoInlinePolicy",
            reason="the cluster role's use of the stack's key for secrets envelope encryption (CDK's grant), "
            "inline: it lives and goes with the role",
        )
        acknowledge(
            cluster.role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEKSClusterPolicy]",
            reason="the policy EKS requires of a cluster's own role (EKS User Guide, 'Amazon EKS cluster IAM "
            "role'); only the EKS service assumes it",
        )
        ignore_cfn_lint_on(
            cluster.node.default_child or cluster.node.find_child("Resource"),
            "W3005",
            reason="aws_eks_v2 orders the cluster after the whole VPC (its subnets, routes and NAT gateway, so "
            "that nodes and the kubectl Lambda reach out) with DependsOn; the entries for its own two subnets "
            "repeat their Ref and order nothing differently",
        )
        cluster.connections.allow_from(self.kubectl_security_group, ec2.Port.tcp(443), "kubectl Lambda")
        # Pod Identity gives every controller and workload its role (docs/eks.md, section 2): not IRSA.
        self.ready.append(
            eks.Addon(self, "PodIdentityAgent", cluster=as_cluster, addon_name="eks-pod-identity-agent")
        )
        self._system_nodes(as_cluster, node_subnets, system_instance_type, system_nodes)
        return as_cluster

    def _system_nodes(
        self, cluster: eks.ICluster, subnets: Sequence[ec2.ISubnet], instance_type: str, nodes: int
    ) -> None:
        """The CPU node group (a managed one: EKS gives its role an access entry) in the route's AZ."""
        system = eks.Nodegroup(
            self,
            "System",
            cluster=cluster,
            instance_types=[ec2.InstanceType(instance_type)],
            min_size=nodes,
            max_size=nodes,
            desired_size=nodes,
            subnets=ec2.SubnetSelection(subnets=list(subnets)),
            ami_type=eks.NodegroupAmiType.AL2023_X86_64_STANDARD,
            labels=SYSTEM_NODES,
        )
        acknowledge(
            system.role,
            *(
                f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{name}]"
                for name in (
                    "AmazonEKSWorkerNodePolicy",
                    "AmazonEKS_CNI_Policy",
                    "AmazonEC2ContainerRegistryReadOnly",
                )
            ),
            reason="AWS's policies for an EKS node (EKS User Guide, 'Amazon EKS node IAM role'), which "
            "aws_eks_v2 attaches to a managed node group's role: joining the cluster, pod networking by "
            "vpc-cni, image pulls",
        )

    def _import(
        self,
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
        name: str,
        security_group_id: str,
        layer: KubectlV36Layer,
    ) -> eks.ICluster:
        # The Lambda's own role, so that an access entry can make it the cluster's admin: an imported cluster
        # knows nothing of the stack's principals. Destroying the stack removes the entry, not the cluster.
        role = iam.Role(
            self,
            "KubectlRole",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"applies sonic-deploy's Kubernetes objects to the cluster {name}",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AWSLambdaVPCAccessExecutionRole")
            ],
        )
        acknowledge(
            role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole]",
            reason="the network interfaces a Lambda in a VPC needs, and its logs: AWS's policy for exactly that",
        )
        stack = Stack.of(self)
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["eks:DescribeCluster"],
                resources=[stack.format_arn(service="eks", resource="cluster", resource_name=name)],
            )
        )
        # 2.275's imported cluster ignores `kubectl_provider_options` (aws-eks-v2/lib/cluster.js): the provider
        # is made on a bare import, then handed to the cluster the stack uses.
        # The VPC too: a provider with private subnets reads the cluster's VPC (kubectl-provider.js).
        bare = eks.Cluster.from_cluster_attributes(self, "Named", cluster_name=name, vpc=vpc)
        provider = eks.KubectlProvider(
            self,
            "KubectlProvider",
            cluster=bare,
            kubectl_layer=layer,
            private_subnets=list(subnets),
            security_groups=[self.kubectl_security_group],
            role=role,
        )
        cluster = eks.Cluster.from_cluster_attributes(
            self,
            "Cluster",
            cluster_name=name,
            vpc=vpc,
            cluster_security_group_id=security_group_id,
            kubectl_provider=provider,
        )
        ec2.CfnSecurityGroupIngress(
            self,
            "KubectlIngress",
            group_id=security_group_id,
            ip_protocol="tcp",
            from_port=443,
            to_port=443,
            source_security_group_id=self.kubectl_security_group.security_group_id,
            description="sonic-deploy's kubectl Lambda to the cluster endpoint",
        )
        self.ready.append(
            eks.AccessEntry(
                self,
                "KubectlAccess",
                cluster=cluster,
                principal=role.role_arn,
                access_policies=[
                    eks.AccessPolicy.from_access_policy_name(
                        ADMIN_POLICY, access_scope_type=eks.AccessScopeType.CLUSTER
                    )
                ],
            )
        )
        return cluster

    @property
    def name(self) -> str:
        """The cluster's name as a plain string (never a token)."""
        return self._name


def _kubectl_provider_on_the_key(provider: IConstruct, key: kms.IKey) -> None:
    """aws_eks_v2's kubectl provider as CDK makes it (the handler that runs kubectl and helm, and the provider
    framework's onEvent function CloudFormation invokes): their log groups on the stack's key, and what the
    scanners say of the rest acknowledged, each with its reason."""
    handler = provider.node.find_child("Handler")
    on_event = provider.node.find_child("Provider").node.find_child("framework-onEvent")
    assert isinstance(handler, lambda_.Function) and isinstance(on_event, lambda_.Function)
    for function in (handler, on_event):
        # CDK makes each function's log group (cdk.json's @aws-cdk/aws-lambda:useCdkManagedLogGroup) with no
        # key; the key policy lets CloudWatch Logs use the key for the account's log groups in this Region.
        log_group = function.node.try_find_child("LogGroup")
        assert isinstance(log_group, logs.LogGroup), "the kubectl provider's Lambda has no log group"
        cast(logs.CfnLogGroup, log_group.node.default_child).kms_key_id = key.key_arn
        ignore_cfn_lint_on(
            function,
            "W3005",
            reason="lambda.Function writes a DependsOn on its role beside the GetAtt of it: the extra edge is "
            "CDK's and orders nothing differently",
        )
    _acknowledge_kubectl_handler(handler)
    _acknowledge_provider_framework(on_event, handler)


def _acknowledge_kubectl_handler(handler: lambda_.Function) -> None:
    """The function that runs kubectl and helm against the private endpoint, in the route's subnets."""
    stack = Stack.of(handler)
    reasons = {
        ("LambdaDLQ", "CKV_AWS_116"): "the provider framework's onEvent function invokes it synchronously "
        "(RequestResponse) and answers CloudFormation with its result, so a dead-letter queue, which only "
        "asynchronous invocations use, would never receive anything",
        ("LambdaConcurrency", "CKV_AWS_115"): "only the provider framework invokes it, once per Kubernetes "
        "manifest or Helm release a deploy changes, so its concurrency is bounded already; reserving any fails "
        "the deploy in an account whose quota is still a new account's 10",
    }
    for (rule, check), reason in reasons.items():
        acknowledge_compliance(handler, rule, reason=reason)
        skip_checkov(handler, check, reason=reason)
    skip_checkov(
        handler,
        "CKV_AWS_173",
        reason="its one variable is AWS_STS_REGIONAL_ENDPOINTS=regional (aws_eks_v2's), not a secret; Lambda "
        "encrypts it at rest with its AWS managed key",
    )
    acknowledge(
        handler,
        "AwsSolutions-L1",
        reason="aws-cdk-lib picks this runtime for its kubectl handler and the AWS CLI layer bundled with it "
        "(Runtime.determineLatestPythonRuntime); a newer one comes with an aws-cdk-lib upgrade, not set here",
    )
    role = handler.role
    assert role is not None
    # aws_eks_v2 attaches ECR Public's read-only policy under a condition of its own (the aws partition),
    # which cdk-nag prints as the Fn::If it is.
    condition = role.node.scope.node.find_child("HasEcrPublic") if role.node.scope is not None else None
    assert isinstance(condition, CfnCondition), "the kubectl handler's role has no HasEcrPublic condition"
    ecr_public = json.dumps(
        {
            "Fn::If": [
                stack.get_logical_id(cast(CfnResource, condition)),
                {
                    "Fn::Join": [
                        "",
                        [
                            "arn:",
                            {"Ref": "AWS::Partition"},
                            ":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly",
                        ],
                    ]
                },
                {"Ref": "AWS::NoValue"},
            ]
        },
        separators=(",", ":"),
    )
    acknowledge(
        role,
        "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly]",
        f"AwsSolutions-IAM4[Policy::{ecr_public}]",
        reason="read-only registry access aws_eks_v2 attaches to every kubectl handler for Helm charts kept in "
        "ECR or ECR Public (OCI): Karpenter's from ECR Public, every chart from [eks.mirror]'s ECR in air-gapped "
        "mode; it pushes nothing",
    )
    acknowledge(
        role,
        *(
            f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/{name}]"
            for name in ("AWSLambdaBasicExecutionRole", "AWSLambdaVPCAccessExecutionRole")
        ),
        reason="AWS's policies for a Lambda function's own logs and, in a VPC, its network interfaces: the "
        "handler runs in the route's private subnets to reach the private endpoint",
    )
    acknowledge_compliance(
        role,
        "IAMNoInlinePolicy",
        reason="the kubectl handler's role holds eks:DescribeCluster on this cluster alone, in an inline "
        "policy that lives and goes with the role",
    )


def _acknowledge_provider_framework(on_event: lambda_.Function, handler: lambda_.Function) -> None:
    """The custom resource provider framework's onEvent function: CloudFormation invokes it, it invokes the
    kubectl handler."""
    acknowledge_custom_resource_handler(on_event, outside_vpc=None)
    skip_checkov(
        on_event,
        "CKV_AWS_173",
        reason="its one variable is USER_ON_EVENT_FUNCTION_ARN, the kubectl handler's ARN (CDK's provider "
        "framework), not a secret; Lambda encrypts it at rest with its AWS managed key",
    )
    handler_id = Stack.of(handler).get_logical_id(cast(CfnResource, handler.node.default_child))
    role = on_event.role
    assert role is not None
    acknowledge(
        role,
        f"AwsSolutions-IAM5[Resource::<{handler_id}.Arn>:*]",
        reason="the provider framework may invoke the kubectl handler, any version of it (the ARN's :*), and "
        "no other function",
    )
    acknowledge(
        role,
        *(
            f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/{name}]"
            for name in ("AWSLambdaBasicExecutionRole", "AWSLambdaVPCAccessExecutionRole")
        ),
        reason="AWS's policies for a Lambda function's own logs and, in a VPC, its network interfaces: CDK "
        "puts the provider framework in the kubectl handler's subnets",
    )
    acknowledge_compliance(
        role,
        "IAMNoInlinePolicy",
        reason="the provider framework's role may invoke the kubectl handler alone, in an inline policy that "
        "lives and goes with the role",
    )
