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
    check_secret_names,
    check_services,
    check_workers,
)
from sonic_deploy.config.errors import MISSING, ConfigError, Fail
from sonic_deploy.config.placeholders import PLACEHOLDER_MARK, example_emails, image_placeholders
from sonic_deploy.routes.eks.config import EksConfig

if TYPE_CHECKING:
    from pathlib import Path

    from sonic_deploy.config.catalogue import InstanceCatalogue
    from sonic_deploy.config.schema import EnvironmentConfig, ModelPackages

SERVICES = ("api_server", "gpu_worker", "nats", "cloudwatch_agent")
# Kubernetes' own namespaces and the controllers' (constructs/add_ons.py: kube-system, keda).
RESERVED_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease", "keda"})
# Air-gapped mode (the licence proxy and its loader) comes later to this route (docs/eks.md, section 12).
NOT_YET = ("licence_proxy", "licence_loader")
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
    for service in NOT_YET:
        if service in eks.services:
            fail(
                f"eks.services.{service}",
                "(a table)",
                "the EKS route runs in connected mode only so far: there is no licence proxy to run",
                f"remove [eks.services.{service}] (air-gapped mode: the ECS route)",
            )
    check_services(fail, "eks", eks.services, SERVICES, "Deployment in the stack's template")
    for name, spec in eks.services.items():
        if spec.licence_proxy_url_variable is not None:
            fail(
                f"eks.services.{name}.licence_proxy_url_variable",
                spec.licence_proxy_url_variable,
                "the EKS route runs no licence proxy (connected mode only so far): the variable would name nothing",
                "remove it",
            )
    check_idle_timeout(fail, "eks", eks.nlb_idle_timeout_s, eks.deregistration_delay_s)
    _check_cluster(fail, env, eks)
    _check_capacity(fail, name, eks, catalogue)
    check_api(fail, "eks", name, env, eks.api, eks.deregistration_delay_s)


def check_limits(fail: Fail, env: EnvironmentConfig) -> None:
    if env.eks is not None:
        check_api_limits(fail, "eks", env.eks.api)


def public_subnets(env: EnvironmentConfig) -> bool:
    return True  # connected mode: NAT gateways for licensing, model artefacts and the charts' images


def alarm_emails(env: EnvironmentConfig) -> list[str] | None:
    return env.eks.alarms.email if env.eks is not None else None


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
    for name, service in env.eks.services.items():
        variable = service.nats_url_variable
        if variable is not None and PLACEHOLDER_MARK.lower() in variable.lower():
            yield ConfigError(
                file=env_file,
                field=f"eks.services.{name}.nats_url_variable",
                value=variable,
                problem="still the shipped placeholder: the image would not be told where NATS is",
                fix="write the variable it reads NATS's address from, from Cartesia's deployment bundle",
            )
    yield from example_emails(env_file, "eks.alarms.email", env.eks.alarms.email)
