"""The EKS route's settings: the `[eks]` table of an environment file and the tables under it. Its services,
secrets and API take the models the ECS route shares (config/cartesia.py); the design is docs/eks.md."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from sonic_deploy.config.base import Ratio, Strict
from sonic_deploy.config.cartesia import (
    ApiConfig,
    LicenceSettings,
    SecretsConfig,
    ServiceConfig,
    ServiceName,
    WorkerAlarmConfig,
)

# The kubectl Lambda layer the stack applies objects with (aws-cdk.lambda-layer-kubectl-v36) runs kubectl 1.36,
# which supports clusters one minor either side (aws_eks_v2's README, "Runtime"); aws-cdk-lib 2.275 creates
# clusters up to 1.36 (`KubernetesVersion.V1_36`), and Karpenter 1.14 supports Kubernetes up to 1.36
# (website/content/en/v1.14/upgrading/compatibility.md at 1d92708).
KUBECTL_MINOR = 36
KubernetesVersion = Literal["1.35", "1.36"]
DEFAULT_VERSION: KubernetesVersion = "1.36"
# Karpenter's AMI alias (EC2NodeClass amiSelectorTerms, `al2023@v<YYYYMMDD>`), pinned as the ECS route pins its
# AMI: awslabs/amazon-eks-ami CHANGELOG.md at 81fec2e, release v20260714 (NVIDIA driver 580.159.03, as ECS's).
AMI_ALIAS = re.compile(r"al2023@(?:v[0-9]{8}|latest)")
DEFAULT_AMI_ALIAS = "al2023@v20260714"
# An EKS cluster name (CreateCluster: 1-100 characters, letters, digits, hyphens and underscores, a letter or
# digit first).
CLUSTER_NAME = r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$"
# An IAM role's ARN (CreateAccessEntry's principalArn), path and name as IAM takes them.
IAM_ROLE_ARN = r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}$"
# A registry path in private ECR (an OCI registry host and repository prefix), as Helm's `oci://` and an image
# reference take it: <account>.dkr.ecr.<region>.amazonaws.com[/<prefix>].
ECR_PATH = r"^[0-9]{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$"
# A Kubernetes namespace: an RFC 1123 label.
NAMESPACE = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"


class EksClusterConfig(Strict):
    """`[eks.cluster]`: the cluster the route runs in, made by the stack or one you have (docs/eks.md, 2)."""

    existing: Annotated[str, Field(pattern=CLUSTER_NAME)] | None = Field(
        default=None,
        description="an existing cluster's name: the stack adds only the AWS side and the Kubernetes objects "
        "(its VPC goes in network.existing_vpc); absent, the stack creates a cluster",
    )
    security_group_id: Annotated[str, Field(pattern=r"^sg-[0-9a-f]{8,17}$")] | None = Field(
        default=None,
        description="an existing cluster's cluster security group (DescribeCluster's clusterSecurityGroupId): "
        "the stack's kubectl Lambda reaches the private endpoint through it",
    )
    admins: list[Annotated[str, Field(pattern=IAM_ROLE_ARN)]] = Field(
        default=[],
        description="IAM roles given cluster-admin access entries (AmazonEKSClusterAdminPolicy) on a cluster the "
        "stack makes, for your operators' kubectl; an existing cluster's access stays yours to manage",
    )
    system_instance_type: str = Field(
        default="m7i.xlarge",
        pattern=r"^[a-z][a-z0-9-]*\.[a-z0-9]+$",
        description="the CPU node group of a cluster the stack makes: Karpenter, the controllers, the API server "
        "and NATS",
    )
    system_nodes: Annotated[int, Field(ge=2, le=20)] = 2


class EksCapacityConfig(Strict):
    """`[eks.capacity]`: the GPU nodes Karpenter launches (docs/eks.md, 1)."""

    instance_types: list[str] = Field(
        default=[],
        description="more GPU types after eks.instance_type, in order of preference (a NodePool each, lower "
        "weight): each one GPU, each fits the worker",
    )
    ami: str = Field(
        default=DEFAULT_AMI_ALIAS,
        description='the EKS AL2023 AMI release as Karpenter\'s alias, "al2023@v<YYYYMMDD>"; "al2023@latest" '
        "(a driver change arriving unreviewed) only in dev",
    )

    @field_validator("ami")
    @classmethod
    def _alias(cls, value: str) -> str:
        if AMI_ALIAS.fullmatch(value) is None:
            raise PydanticCustomError(
                "ami_alias",
                'not a Karpenter AL2023 alias ("al2023@v<YYYYMMDD>", a release of awslabs/amazon-eks-ami; '
                "default {default})",
                {"default": DEFAULT_AMI_ALIAS},
            )
        return value


class EksMirrorConfig(Strict):
    """`[eks.mirror]`: the controllers' charts and images in your ECR, for a cluster without egress (docs/eks.md,
    section 12). `sonic-deploy mirror --env NAME` lists what goes where."""

    charts: Annotated[str, Field(pattern=ECR_PATH)] = Field(
        description="where the charts are, as Helm's oci:// takes it without the scheme: chart <name> at "
        "<charts>/<name>:<version> (helm push <chart>.tgz oci://<charts>)",
    )
    images: Annotated[str, Field(pattern=ECR_PATH)] = Field(
        description="where the controllers' images are: <registry>/<path> upstream at <images>/<registry>/<path>, "
        "same tag and digest",
    )


class EksAlarmConfig(WorkerAlarmConfig):
    provisioning_minutes: Annotated[int, Field(ge=1, le=1440)] = Field(
        default=15,
        description="a pod of the namespace not ready this long (a GPU worker waiting for a node): capacity, "
        "quota or the pod itself is wrong",
    )


class EksConfig(LicenceSettings):
    availability_zone: str = Field(
        description="the one AZ of the GPU and system nodes, placement group and NLB"
    )
    kubernetes_version: KubernetesVersion = Field(
        default=DEFAULT_VERSION,
        description="the cluster's Kubernetes version (an existing cluster's, as DescribeCluster gives it): one "
        "kubectl 1.36 and Karpenter 1.14 both support",
    )
    instance_type: str = "g6e.xlarge"
    min_workers: Annotated[int, Field(ge=0, le=1000)] = 2
    max_workers: Annotated[int, Field(ge=0, le=1000)] = 6
    api_server_replicas: Annotated[int, Field(ge=0, le=1000)] = 2
    nats_replicas: Annotated[int, Field(ge=1, le=5)] = 3
    target_utilisation: Ratio = 0.8
    gpu_target_percent: Annotated[float, Field(gt=0, le=100)] = 80.0
    scale_out_window_s: Annotated[int, Field(ge=0, le=3600)] = 30
    scale_in_window_s: Annotated[int, Field(ge=0, le=3600)] = 900
    root_volume_gib: Annotated[int, Field(ge=30, le=16384)] = 200
    namespace: Annotated[str, Field(pattern=NAMESPACE)] = "sonic"
    listener_port: Annotated[int, Field(ge=1, le=65535)] | None = Field(
        default=None, description="the load balancer's port; default 443 with TLS (eks.api.tls), 80 without"
    )
    nlb_idle_timeout_s: Annotated[int, Field(ge=60, le=6000)] = 3600
    deregistration_delay_s: Annotated[int, Field(ge=0, le=3600)] = Field(
        default=300,
        description="how long a call keeps its API server pod once a rollout or scale-in replaces it",
    )
    api_stop_timeout_s: Annotated[int, Field(ge=2, le=600)] = Field(
        default=120, description="SIGTERM to SIGKILL for the API server, after the deregistration delay"
    )
    worker_stop_timeout_s: Annotated[int, Field(ge=2, le=600)] = Field(
        default=120, description="SIGTERM to SIGKILL for a GPU worker: how long its in-flight utterances get"
    )
    reuse_repositories: bool = Field(
        default=False,
        description="use the ECR repositories an earlier deploy left behind instead of creating them",
    )
    copy_images: bool = Field(default=True, description="copy images from Cartesia's registry at deploy time")
    image_copy_memory_mib: Annotated[int, Field(ge=128, le=10240)] = 3008
    model_id: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")] | None = Field(
        default=None,
        description="the model_id agents send (stack output ModelId); default: the environment's sonic_version",
    )
    cartesia_version: Annotated[str, Field(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")] = Field(
        default="2025-04-16",
        description="the Cartesia API version agents send (stack output CartesiaVersion)",
    )
    secrets: SecretsConfig
    services: dict[ServiceName, ServiceConfig]
    alarms: EksAlarmConfig = EksAlarmConfig()
    api: ApiConfig = ApiConfig()
    cluster: EksClusterConfig = EksClusterConfig()
    capacity: EksCapacityConfig = EksCapacityConfig()
    mirror: EksMirrorConfig | None = Field(
        default=None,
        description="the controllers' charts and images from your ECR instead of their public registries: "
        "required in air-gapped mode",
    )

    @property
    def instance_types(self) -> list[str]:
        """The GPU types in order of preference (a NodePool each)."""
        return [self.instance_type, *self.capacity.instance_types]
