"""The rules of the EKS route's `[eks]` table. What it shares with the ECS route (services, secrets, the API's
listener, the GPU type) is in `config/cartesia_rules.py` and `config/cartesia_api_rules.py`; what is the
route's own (the cluster, the Kubernetes version, Karpenter's AMI) is here. The design: docs/eks.md."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from sonic_deploy.config.base import DEFAULT_ENVIRONMENT
from sonic_deploy.config.cartesia_api_rules import check_api, check_api_limits
from sonic_deploy.config.cartesia_rules import (
    check_created_secrets,
    check_gpu_type,
    check_idle_timeout,
    check_licence_mode,
    check_licence_path,
    check_secret_names,
    check_services,
    check_workers,
)
from sonic_deploy.config.errors import MISSING, ConfigError, Fail
from sonic_deploy.config.placeholders import address_placeholders, example_emails, image_placeholders
from sonic_deploy.routes.eks.addon_registry import ADD_ON_REGISTRY_ACCOUNTS
from sonic_deploy.routes.eks.charts import registry_region
from sonic_deploy.routes.eks.config import EksConfig
from sonic_deploy.routes.eks.manifests_pods import SECRETS_MOUNT
from sonic_deploy.routes.route import PRIVATE_CA_TLS, ClosedVariant

if TYPE_CHECKING:
    from pathlib import Path

    from sonic_deploy.config.cartesia import LicenceSettings, SecretsConfig
    from sonic_deploy.config.catalogue import InstanceCatalogue
    from sonic_deploy.config.schema import EnvironmentConfig, ModelPackages

SERVICES = ("api_server", "gpu_worker", "licence_proxy", "nats", "cloudwatch_agent")
# Kubernetes' own namespaces and the controllers' (constructs/add_ons.py: kube-system, keda).
RESERVED_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease", "keda"})
# What the GPU node keeps for itself and its DaemonSets (kubelet, the device plugin, DCGM exporter, the CNI):
# the worker's request must leave it free, or the pod never schedules.
NODE_RESERVED_SHARE = 0.1


def _table(fail: Fail, env: EnvironmentConfig) -> EksConfig:
    if env.eks is None:
        fail(
            "eks",
            MISSING,
            'routes include "eks" but there is no [eks] table',
            'add an [eks] table (see config/environments/dev-eks.toml) or remove "eks" from routes',
        )
    return env.eks


def _check_cluster(fail: Fail, env: EnvironmentConfig, eks: EksConfig) -> None:
    cluster = eks.cluster
    if eks.namespace in RESERVED_NAMESPACES:
        fail(
            "eks.namespace",
            eks.namespace,
            "a namespace Kubernetes or the stack's controllers own: the route's objects and their Role would "
            "mix with theirs",
            'use a namespace of the route\'s own, e.g. "sonic"',
        )
    if cluster.existing is None:
        return
    if cluster.admins:
        fail(
            "eks.cluster.admins",
            cluster.admins,
            f"the cluster {cluster.existing} is yours: its access entries are yours to manage, and the bootstrap "
            "policy lets the stack make entries there only for its own (sonic-*) roles",
            "remove it, and give your operators access with `aws eks create-access-entry` on your cluster",
        )
    if env.network.existing_vpc is None:
        fail(
            "network.existing_vpc",
            MISSING,
            f"eks.cluster.existing names the cluster {cluster.existing}, and its nodes and load balancer must be "
            "in that cluster's VPC",
            "add [network.existing_vpc] with the cluster's VPC id, range, private subnets and their AZs "
            "(aws eks describe-cluster --name <name> --query cluster.resourcesVpcConfig)",
        )
    if cluster.security_group_id is None:
        fail(
            "eks.cluster.security_group_id",
            MISSING,
            "the stack's kubectl Lambda reaches the existing cluster's private endpoint through its cluster "
            "security group, and none is named",
            "set it to DescribeCluster's cluster.resourcesVpcConfig.clusterSecurityGroupId",
        )


def _check_mirror(fail: Fail, env: EnvironmentConfig, eks: EksConfig) -> None:
    mirror = eks.mirror
    if mirror is None:
        if eks.licence_mode == "air-gapped":
            fail(
                "eks.mirror",
                MISSING,
                "air-gapped, the cluster cannot fetch the controllers' charts and images from their public "
                "registries",
                "copy them into your ECR (`sonic-deploy mirror --env NAME` lists them) and add [eks.mirror] "
                "charts and images",
            )
        return
    for field, path in (("charts", mirror.charts), ("images", mirror.images)):
        region = registry_region(path)
        if region != env.region:
            fail(
                f"eks.mirror.{field}",
                path,
                f"a registry in {region}: the cluster reaches ECR in {env.region} only (its VPC endpoints)",
                f"copy them into ECR in {env.region} and name that registry",
            )


def _check_capacity(fail: Fail, name: str, eks: EksConfig, catalogue: InstanceCatalogue) -> None:
    seen: set[str] = set()
    for index, instance_type in enumerate(eks.instance_types):
        field = "eks.instance_type" if index == 0 else f"eks.capacity.instance_types[{index - 1}]"
        check_gpu_type(fail, field, instance_type, catalogue, "EKS")
        if instance_type in seen:
            fail(field, instance_type, "listed twice: one NodePool per type", "remove the repeat")
        seen.add(instance_type)
        instance, worker = catalogue.instance_types[instance_type], eks.services.get("gpu_worker")
        usable_mib = int(instance.memory_gib * 1024 * (1 - NODE_RESERVED_SHARE))
        usable_cpu = int(instance.vcpus * 1024 * (1 - NODE_RESERVED_SHARE))
        if worker is not None and worker.cpu > usable_cpu:
            fail(
                "eks.services.gpu_worker.cpu",
                worker.cpu,
                f"more than a {instance_type} node leaves its pods ({usable_cpu} CPU units of "
                f"{instance.vcpus * 1024}): the worker would never schedule there",
                f"set it to {usable_cpu} or less, or drop {instance_type}",
            )
        if worker is not None and worker.memory_mib > usable_mib:
            fail(
                "eks.services.gpu_worker.memory_mib",
                worker.memory_mib,
                f"more than a {instance_type} node leaves its pods ({usable_mib} MiB): the worker would never "
                "schedule there",
                f"set it to {usable_mib} or less, or drop {instance_type}",
            )
    if eks.capacity.ami.endswith("@latest") and name != DEFAULT_ENVIRONMENT:
        fail(
            "eks.capacity.ami",
            eks.capacity.ami,
            f"outside {DEFAULT_ENVIRONMENT}, a new AMI (and NVIDIA driver) would reach GPU nodes unreviewed at the "
            "next launch",
            'pin a release, e.g. "al2023@v20260714" (awslabs/amazon-eks-ami releases)',
        )


# What the config asks of every route (sonic_deploy/routes/route.py, RouteRules).


def check(
    fail: Fail, name: str, env: EnvironmentConfig, catalogue: InstanceCatalogue, zones: list[str]
) -> None:
    eks = _table(fail, env)
    if env.region not in ADD_ON_REGISTRY_ACCOUNTS:
        fail(
            "region",
            env.region,
            "the EKS guide names no registry of EKS add-on images here, which the nodes' ECR endpoints must "
            "let them pull from",
            "use another Region, or add its registry account to sonic_deploy/routes/eks/addon_registry.py from "
            "the EKS guide's 'View Amazon container image registries for Amazon EKS add-ons'",
        )
    if eks.availability_zone not in zones:
        fail(
            "eks.availability_zone",
            eks.availability_zone,
            "not one of the VPC's Availability Zones",
            f"use one of {', '.join(zones)}",
        )
    check_workers(fail, "eks", eks.min_workers, eks.max_workers)
    if eks.api_server_replicas < 2:
        fail(
            "eks.api_server_replicas",
            eks.api_server_replicas,
            "fewer than 2 API server pods",
            "set eks.api_server_replicas to 2 or more",
        )
    if eks.nats_replicas < 2:
        fail(
            "eks.nats_replicas", eks.nats_replicas, "fewer than 2 NATS servers", "set eks.nats_replicas to 3"
        )
    check_secret_names(fail, "eks", eks.secrets)
    check_created_secrets(fail, "eks", eks.secrets, eks.copy_images)
    check_licence_path(fail, "eks", eks)
    if (eks.licence_data_path.rstrip("/") + "/").startswith(SECRETS_MOUNT + "/"):
        fail(
            "eks.licence_data_path",
            eks.licence_data_path,
            f"inside {SECRETS_MOUNT}, where the proxy's pod mounts its secrets: the two volumes would collide",
            'use a path of its own, e.g. "/data"',
        )
    check_services(fail, "eks", eks.services, SERVICES, "Deployment in the stack's template")
    check_idle_timeout(fail, "eks", eks.nlb_idle_timeout_s, eks.deregistration_delay_s)
    check_licence_mode(fail, "eks", eks, eks.services)
    _check_mirror(fail, env, eks)
    _check_cluster(fail, env, eks)
    _check_capacity(fail, name, eks, catalogue)
    check_api(fail, "eks", name, env, eks.api, eks.deregistration_delay_s)


def check_limits(fail: Fail, env: EnvironmentConfig) -> None:
    if env.eks is not None:
        check_api_limits(fail, "eks", env.eks.api)


def public_subnets(env: EnvironmentConfig) -> bool:
    # Connected mode: a NAT gateway for licensing, model artefacts and the charts' images; air-gapped, none.
    return env.eks is not None and env.eks.nat_gateways > 0


def alarm_emails(env: EnvironmentConfig) -> list[str] | None:
    return env.eks.alarms.email if env.eks is not None else None


def licence(env: EnvironmentConfig) -> tuple[LicenceSettings, SecretsConfig] | None:
    return (env.eks, env.eks.secrets) if env.eks is not None else None


def placeholders(
    env_file: Path,
    packages_file: Path,
    env: EnvironmentConfig,
    packages: ModelPackages,
    model_package_arn: str | None,
) -> Iterator[ConfigError]:
    if env.eks is None:
        return
    yield from image_placeholders(env_file, "eks", env.eks.services)
    yield from address_placeholders(env_file, "eks", env.eks.services, "docs/eks.md, section 8")
    yield from example_emails(env_file, "eks.alarms.email", env.eks.alarms.email)


# The compliance gate's variants of an environment that deploys the route connected on a cluster it makes
# (regular expression, replacement, each matched once in its file): air-gapped, and on an existing cluster.
AIR_GAPPED = (
    (r'(?m)^licence_mode = "connected"', 'licence_mode = "air-gapped"'),
    (r"(?m)^nat_gateways = \d+", "nat_gateways = 0"),
    (r"(?m)^# \[eks\.mirror\]$", "[eks.mirror]"),
    (r"(?m)^# charts = ", "charts = "),
    (r"(?m)^# images = ", "images = "),
    (r"(?m)^tls = false\nallow_plaintext_outside_dev = true$", PRIVATE_CA_TLS),
    # The canary trusts public CAs only (config/cartesia_api_rules.py): off beside a Private CA's listener.
    (r"(?m)^\[tags\]$", "[canary]\nenabled = false\n\n[tags]"),
)
EXISTING_CLUSTER = (
    (r'(?m)^# existing = "', 'existing = "'),
    (r"(?m)^# security_group_id = ", "security_group_id = "),
    (r"(?m)^# \[network\.existing_vpc\]$", "[network.existing_vpc]"),
    (r'(?m)^# vpc_id = "vpc-', 'vpc_id = "vpc-'),
    (r'(?m)^# vpc_cidr = "', 'vpc_cidr = "'),
    (r"(?m)^# private_subnet_ids = ", "private_subnet_ids = "),
    (r"(?m)^# availability_zones = \[", "availability_zones = ["),
    (r"(?m)^# private_route_table_ids = ", "private_route_table_ids = "),
)


def closed_variants(env: EnvironmentConfig) -> list[ClosedVariant]:
    eks = env.eks
    if eks is None or eks.licence_mode != "connected" or eks.cluster.existing is not None:
        return []
    return [
        ClosedVariant("air-gapped", "air-gapped, TLS from a Private CA", AIR_GAPPED),
        ClosedVariant("existing", "an existing cluster and VPC", EXISTING_CLUSTER),
    ]
