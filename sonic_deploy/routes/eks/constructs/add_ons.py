"""The cluster-wide controllers the EKS route's workloads need (docs/eks.md, sections 2-4), each a pinned
Helm release through the cluster's kubectl provider, with its AWS access by EKS Pod Identity (not IRSA: no
OIDC provider to keep)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aws_cdk import Duration, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from sonic_deploy.constructs.findings import acknowledge, as_nag_prints
from sonic_deploy.routes.eks.charts import (
    DCGM_EXPORTER,
    DEVICE_PLUGIN,
    KEDA,
    LOAD_BALANCER_CONTROLLER,
    SECRETS_PROVIDER_AWS,
    SECRETS_STORE_CSI_DRIVER,
    ChartPin,
    chart_source,
    merged,
)
from sonic_deploy.routes.eks.config import EksMirrorConfig
from sonic_deploy.routes.eks.constructs.add_on_policies import (
    keda_statements,
    load_balancer_controller_statements,
    pod_identity_role,
    security_groups_arn,
)

SYSTEM_NAMESPACE = "kube-system"
KEDA_NAMESPACE = "keda"  # The chart README's (keda/README.md:24); created by the release (create_namespace).
LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT = "aws-load-balancer-controller"
# The chart's default (keda/values.yaml, serviceAccount.operator.name), named here for the association.
KEDA_OPERATOR_SERVICE_ACCOUNT = "keda-operator"

# The taint GPU nodes carry (the NodePools' template), tolerated by what must run there.
GPU_TOLERATION: Mapping[str, str] = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
# Karpenter labels each node with its type's GPU maker from the instance type (karpenter-provider-aws@1d92708,
# pkg/apis/v1/labels.go:53, 163; pkg/providers/instancetype/types.go:430): present at registration, before
# any device plugin, with no node-feature-discovery (the chart's default affinity wants NFD's labels).
GPU_NODE_SELECTOR: Mapping[str, str] = {"karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia"}

# Helm's --wait for the releases whose webhooks must answer before the stack's objects apply (the
# TargetGroupBinding, the ScaledObject, the SecretProviderClass); the kubectl provider allows 15 minutes.
_WAIT = Duration.minutes(10)


class ClusterAddOns(Construct):
    """The AWS Load Balancer Controller (TargetGroupBinding only), KEDA (CloudWatch scaling), NVIDIA's device
    plugin and DCGM exporter (GPU nodes), the Secrets Store CSI driver with AWS's provider (ASCP).

    The controllers run on the system nodes (`system_node_selector`); the device plugin and DCGM exporter on
    the GPU nodes only (`gpu_node_selector`, tolerating `gpu_toleration`); the CSI driver and ASCP on every
    node a workload may mount a secret on. Each release is an attribute for the stack's manifests to depend
    on (the TargetGroupBinding on `load_balancer_controller`, the ScaledObject on `keda`, ...).

    Workload roles are the stack's: with Pod Identity, ASCP reads a secret as the pod that mounts it (its own
    service account's association; aws/secrets-store-csi-driver-provider-aws README, "Option 2: Using EKS Pod
    Identity"), so the secrets' reader is the workloads' role, not a controller's.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster: eks.ICluster,
        vpc_id: str,
        system_node_selector: Mapping[str, str],
        gpu_node_selector: Mapping[str, str] = GPU_NODE_SELECTOR,
        gpu_toleration: Mapping[str, str] = GPU_TOLERATION,
        target_group_arns: Sequence[str] = (),
        dcgm_namespace: str = SYSTEM_NAMESPACE,
        cluster_name: str | None = None,
        mirror: EksMirrorConfig | None = None,
    ) -> None:
        """`cluster_name`: the cluster's name as a plain string, when the stack knows it (no CfnJson for the
        tag condition); else the cluster's own, a token for a cluster the stack makes. `mirror`: the charts
        and their images from your ECR (charts.py); None, from their public registries."""
        super().__init__(scope, construct_id)
        self._cluster = cluster
        self._mirror = mirror
        name = cluster_name or cluster.cluster_name
        region = Stack.of(self).region

        self.load_balancer_controller_role = pod_identity_role(
            self,
            "LoadBalancerControllerRole",
            description="AWS Load Balancer Controller: TargetGroupBinding only",
            cluster=name,
            namespace=SYSTEM_NAMESPACE,
            accounts=[LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT],
        )
        lbc_policy = iam.ManagedPolicy(
            self,
            "LoadBalancerControllerPolicy",
            description="AWS Load Balancer Controller: pod IPs in the stack's target group; creates nothing",
            statements=load_balancer_controller_statements(
                self, cluster_name=name, vpc_id=vpc_id, target_group_arns=target_group_arns
            ),
            roles=[self.load_balancer_controller_role],
        )
        acknowledge(
            lbc_policy,
            "AwsSolutions-IAM5[Resource::*]",
            reason="ReadTargetGroupsAndTheNetwork: EC2 and ELB Describe* calls have no resource-level permission "
            "(Service Authorization Reference); writes are scoped by resource (see each statement's Sid)",
        )
        acknowledge(
            lbc_policy,
            f"AwsSolutions-IAM5[Resource::{as_nag_prints(security_groups_arn(self))}]",
            reason="OpenTheClustersTaggedGroupsToTheLoadBalancer: ingress rules only, on whichever group the "
            "target ENI has, known at run time; held to groups tagged kubernetes.io/cluster/<this cluster> in "
            "this VPC by its Null and ec2:Vpc conditions",
        )
        self.load_balancer_controller_association = self._associate(
            "LoadBalancerControllerIdentity",
            SYSTEM_NAMESPACE,
            LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT,
            self.load_balancer_controller_role,
        )
        self.load_balancer_controller = self._release(
            "LoadBalancerController",
            LOAD_BALANCER_CONTROLLER,
            SYSTEM_NAMESPACE,
            {
                "clusterName": name,
                "region": region,
                "vpcId": vpc_id,
                "serviceAccount": {"create": True, "name": LOAD_BALANCER_CONTROLLER_SERVICE_ACCOUNT},
                "nodeSelector": dict(system_node_selector),
                # The TargetGroupBinding reconciler always runs; the Service and Gateway ones only when their
                # gates are on (main.go:243-250, 266). Off, with the Service webhook and IngressClass, so a
                # stray Service of type LoadBalancer is not the controller's; the IAM policy refuses it anyway.
                "enableServiceMutatorWebhook": False,
                "createIngressClassResource": False,
                "ingressClassParams": {"create": False},
                "enableBackendSecurityGroup": False,
                "controllerConfig": {
                    "featureGates": {
                        "EnableServiceController": False,
                        "ALBGatewayAPI": False,
                        "NLBGatewayAPI": False,
                    }
                },
            },
            wait=True,
            after=[self.load_balancer_controller_association, lbc_policy],
        )

        self.keda_operator_role = pod_identity_role(
            self,
            "KedaOperatorRole",
            description="KEDA operator: reads the scaling metrics from CloudWatch",
            cluster=name,
            namespace=KEDA_NAMESPACE,
            accounts=[KEDA_OPERATOR_SERVICE_ACCOUNT],
        )
        keda_policy = iam.ManagedPolicy(
            self,
            "KedaOperatorPolicy",
            description="KEDA operator: cloudwatch:GetMetricData only",
            statements=keda_statements(),
            roles=[self.keda_operator_role],
        )
        acknowledge(
            keda_policy,
            "AwsSolutions-IAM5[Resource::*]",
            reason="ReadScalingMetrics: cloudwatch:GetMetricData has no resource type or condition key "
            "(Service Authorization Reference)",
        )
        # A TriggerAuthentication with `podIdentity.provider: aws` and no roleArn reads with the operator's
        # own credentials: GetAwsAuthorization sets UsingPodIdentity (pkg/scalers/aws/aws_common.go:88-100),
        # GetCredentials loads the default chain (aws_config_cache.go:99-111), Pod Identity's here.
        self.keda_association = self._associate(
            "KedaOperatorIdentity", KEDA_NAMESPACE, KEDA_OPERATOR_SERVICE_ACCOUNT, self.keda_operator_role
        )
        self.keda = self._release(
            "Keda",
            KEDA,
            KEDA_NAMESPACE,
            {
                # The operator's, metrics server's and webhooks' fallback (templates/*/deployment.yaml:
                # `.Values.<component>.nodeSelector | default .Values.nodeSelector`).
                "nodeSelector": dict(system_node_selector),
                "serviceAccount": {"operator": {"create": True, "name": KEDA_OPERATOR_SERVICE_ACCOUNT}},
            },
            wait=True,
            after=[self.keda_association, keda_policy],
        )

        gpu_affinity = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    # A list replaces the chart's NFD terms (values.yaml:64-85) whole; a map would merge.
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": key, "operator": "In", "values": [value]}
                                for key, value in gpu_node_selector.items()
                            ]
                        }
                    ]
                }
            }
        }
        self.device_plugin = self._release(
            "DevicePlugin",
            DEVICE_PLUGIN,
            SYSTEM_NAMESPACE,
            {"affinity": gpu_affinity, "tolerations": [dict(gpu_toleration)]},
        )
        self.dcgm_exporter = self._release(
            "DcgmExporter",
            DCGM_EXPORTER,
            # Where the workloads' CloudWatch agent may list pods (a Role in its namespace, manifests_metrics.py).
            dcgm_namespace,
            {
                "nodeSelector": dict(gpu_node_selector),
                "tolerations": [dict(gpu_toleration)],
                # SYS_ADMIN only serves the profiling counters (values.yaml:99); without it the exporter warns
                # and leaves them out (internal/pkg/capabilities/capabilities.go:85-100). The GPU utilisation
                # the scaling reads, DCGM_FI_DEV_GPU_UTIL, is a device field. An empty list replaces the chart's.
                "securityContext": {"capabilities": {"add": [], "drop": ["ALL"]}},
                # No Prometheus Operator: the CloudWatch agent scrapes the exporter's Service.
                "serviceMonitor": {"enabled": False},
            },
        )

        # Helm charts, not the EKS add-on: the Secrets Manager guide ("Install ASCP for Amazon EKS") offers
        # ASCP as an EKS add-on, but its version names and configuration schema were not readable offline;
        # these pins are, and upgrade through the same reviewed diff as the other releases.
        self.secrets_store_csi_driver = self._release(
            "SecretsStoreCsiDriver",
            SECRETS_STORE_CSI_DRIVER,
            SYSTEM_NAMESPACE,
            {
                "syncSecret": {"enabled": True},
                # A secret's new value reaches the mounted files (the air-gapped licence loader's) within a
                # poll (charts/secrets-store-csi-driver/values.yaml:222-225 at v1.6.0; the binary's default 2m).
                "enableSecretRotation": True,
                "rotationPollInterval": "2m",
                # ASCP needs both audiences' tokens (main.go:61; utils/token_parser.go:10-12, the second Pod
                # Identity's), as its own chart's bundled driver sets them (values.yaml, tokenRequests). The
                # driver's default toleration (`operator: Exists`) already puts it on GPU nodes.
                "tokenRequests": [{"audience": "sts.amazonaws.com"}, {"audience": "pods.eks.amazonaws.com"}],
            },
            wait=True,
        )
        self.secrets_provider_aws = self._release(
            "SecretsProviderAws",
            SECRETS_PROVIDER_AWS,
            SYSTEM_NAMESPACE,
            {
                "secrets-store-csi-driver": {"install": False},
                "awsRegion": region,
                "tolerations": [dict(gpu_toleration)],
            },
            wait=True,
            after=[self.secrets_store_csi_driver],
        )

    @property
    def releases(self) -> tuple[eks.HelmChart, ...]:
        """Every release, for a manifest that needs them all."""
        return (
            self.load_balancer_controller,
            self.keda,
            self.device_plugin,
            self.dcgm_exporter,
            self.secrets_store_csi_driver,
            self.secrets_provider_aws,
        )

    def _associate(
        self, construct_id: str, namespace: str, service_account: str, role: iam.IRole
    ) -> eks.CfnPodIdentityAssociation:
        """The L1 association, not ServiceAccount(identity_type=POD_IDENTITY): that one applies its own
        ServiceAccount manifest, which the chart's own (Helm-owned) would clash with, and asks the cluster for
        the Pod Identity Agent add-on (service-account.js), which an existing cluster must already run."""
        return eks.CfnPodIdentityAssociation(
            self,
            construct_id,
            cluster_name=self._cluster.cluster_name,
            namespace=namespace,
            service_account=service_account,
            role_arn=role.role_arn,
        )

    def _release(
        self,
        construct_id: str,
        pin: ChartPin,
        namespace: str,
        values: Mapping[str, Any],
        *,
        wait: bool = False,
        after: Sequence[Construct] = (),
    ) -> eks.HelmChart:
        """A pinned release named after its chart. `after`: what its pods need first; a Pod Identity
        association and its policy before the pods start, as the agent's webhook injects the credentials'
        environment at pod creation (manage-access/aws-access/service-accounts.adoc:290-300)."""
        source = chart_source(pin, self._mirror)
        release = eks.HelmChart(
            self,
            construct_id,
            cluster=self._cluster,
            chart=pin.chart,
            repository=source.repository,
            version=pin.version,
            release=pin.chart,
            namespace=namespace,
            values=merged(values, source.values),
            wait=wait,
            timeout=_WAIT if wait else None,
        )
        for dependency in after:
            release.node.add_dependency(dependency)
        return release
