"""The rules of the ECS route's `[ecs]` table that need more than one field or file: the services, their
secrets and plain variables, NATS's cluster, the GPU worker on its instance. The capacity's are in
`capacity_rules.py`, the API's load balancer's in `config/cartesia_api_rules.py` (shared with EKS, as are
`config/cartesia_rules.py`'s), the peers' addresses in
`service_addresses.py`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sonic_deploy.config.cartesia import ServiceConfig
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
from sonic_deploy.config.catalogue import InstanceCatalogue
from sonic_deploy.config.errors import MISSING, Fail
from sonic_deploy.config.fargate import check_fargate_size
from sonic_deploy.routes.ecs.config import NATS_ROUTE_PORT, SERVICE_NAMESPACE, EcsConfig
from sonic_deploy.routes.ecs.placeholders import placeholders as ecs_placeholders
from sonic_deploy.routes.ecs.service_addresses import check_address_variables
from sonic_deploy.routes.route import PRIVATE_CA_TLS, ClosedVariant

if TYPE_CHECKING:
    from sonic_deploy.config.cartesia import LicenceSettings, SecretsConfig
    from sonic_deploy.config.schema import EnvironmentConfig

# The first CloudWatch agent release that merges CW_OTEL_CONFIG_CONTENT (the histogram form of worker TTFA).
OTEL_MERGE_AGENT_VERSION = (1, 300066, 0)


SERVICES = ("api_server", "gpu_worker", "licence_proxy", "nats", "cloudwatch_agent")
FARGATE_SERVICES = ("api_server", "licence_proxy", "nats", "cloudwatch_agent")  # the agent: its scraper task
# The CloudWatch agent on each GPU host (SonicMetrics): ECS keeps its memory free (ECS_RESERVED_MEMORY), and
# the worker leaves it this much CPU.
HOST_AGENT_CPU, HOST_AGENT_MEMORY_MIB = 128, 256


NATS_ROUTES = f"nats://nats.{SERVICE_NAMESPACE}:{NATS_ROUTE_PORT}"
# A cluster that one DNS seed always joins whole (see _check_nats_cluster).
MOST_NATS_SERVERS = 3
NATS_CLUSTER_COMMAND = f'["--cluster_name", "sonic", "--cluster", "nats://0.0.0.0:{NATS_ROUTE_PORT}", "--routes", "{NATS_ROUTES}"]'


def _flag(command: list[str], name: str) -> str | None:
    """The value of nats-server's `--name` (or `-name`) in `command`, written `--name value` or `--name=value`
    (Go's flag syntax), or None."""
    for index, argument in enumerate(command):
        flag, equals, value = argument.lstrip("-").partition("=")
        if argument.startswith("-") and flag == name:
            if equals:
                return value
            return command[index + 1] if index + 1 < len(command) else ""
    return None


def _check_nats_cluster(fail: Fail, ecs: EcsConfig) -> None:
    """Every request crosses NATS: one server is a single point of failure, and several unclustered servers
    behind one DNS name would split API servers from workers. The servers must listen for routes on the port
    the security group opens between them, and dial each other through the service's DNS name."""
    if ecs.nats_tasks < 2:
        fail("ecs.nats_tasks", ecs.nats_tasks, "fewer than 2 NATS servers", "set ecs.nats_tasks to 3")
    # nats-server route.go: a route URL that resolves only to the server itself is dropped for good; with
    # one DNS seed, 4 or more servers can settle as two pairs that never route to each other.
    if ecs.nats_tasks > MOST_NATS_SERVERS:
        fail(
            "ecs.nats_tasks",
            ecs.nats_tasks,
            f"more than {MOST_NATS_SERVERS} NATS servers dialling each other through one DNS name can stay split "
            "for good (nats-server drops a route that resolves only to itself), cutting API servers off "
            "from workers",
            f"set ecs.nats_tasks to {MOST_NATS_SERVERS}",
        )
    nats = ecs.services.get("nats")
    if nats is None:
        return
    cluster, routes = _flag(nats.command, "cluster"), _flag(nats.command, "routes")
    if cluster is None or routes is None:
        problem = f"{ecs.nats_tasks} NATS servers that do not form a cluster"
    elif not cluster.endswith(f":{NATS_ROUTE_PORT}"):
        problem = (
            f"--cluster {cluster}: the servers would listen for routes on another port than {NATS_ROUTE_PORT}"
        )
    elif NATS_ROUTES not in routes.split(","):
        problem = f"--routes {routes}: the servers would not dial each other through {NATS_ROUTES}"
    else:
        return
    fail("ecs.services.nats.command", nats.command, problem, f"set command = {NATS_CLUSTER_COMMAND}")


def check_ecs(fail: Fail, env: EnvironmentConfig, catalogue: InstanceCatalogue, zones: list[str]) -> None:
    ecs = env.ecs
    if ecs is None:
        fail(
            "ecs",
            MISSING,
            'routes include "ecs" but there is no [ecs] table',
            'add an [ecs] table (see config/environments/dev.toml) or remove "ecs" from routes',
        )
    check_ecs_gpu_type(fail, "ecs.instance_type", ecs.instance_type, catalogue)
    if ecs.availability_zone not in zones:
        fail(
            "ecs.availability_zone",
            ecs.availability_zone,
            "not one of the VPC's Availability Zones",
            f"use one of {', '.join(zones)}",
        )
    check_workers(fail, "ecs", ecs.min_workers, ecs.max_workers)
    if ecs.api_server_tasks < 2:
        fail(
            "ecs.api_server_tasks",
            ecs.api_server_tasks,
            "fewer than 2 API server tasks",
            "set ecs.api_server_tasks to 2 or more",
        )
    _check_nats_cluster(fail, ecs)
    check_secret_names(fail, "ecs", ecs.secrets)
    check_licence_path(fail, "ecs", ecs)

    def fargate(name: str, spec: ServiceConfig) -> None:
        if name in FARGATE_SERVICES:
            check_fargate_size(fail, f"ecs.services.{name}", spec.cpu, spec.memory_mib)

    check_services(fail, "ecs", ecs.services, SERVICES, "task definition", each=fargate)
    check_address_variables(fail, ecs)
    check_worker_fits(fail, ecs, ecs.instance_type, catalogue)
    check_idle_timeout(fail, "ecs", ecs.nlb_idle_timeout_s, ecs.deregistration_delay_s)
    check_licence_mode(fail, "ecs", ecs, ecs.services)
    agent_tag = ecs.services["cloudwatch_agent"].tag
    version = re.match(r"(\d+)\.(\d+)\.(\d+)", agent_tag)
    if (
        ecs.worker_ttfa.form == "histogram"
        and version is not None
        and tuple(map(int, version.groups())) < OTEL_MERGE_AGENT_VERSION
    ):
        fail(
            "ecs.services.cloudwatch_agent.tag",
            agent_tag,
            'worker_ttfa.form = "histogram" needs the agent to merge an OpenTelemetry pipeline '
            f"(CW_OTEL_CONFIG_CONTENT), which it does from {'.'.join(map(str, OTEL_MERGE_AGENT_VERSION))}",
            "pin a newer release from gallery.ecr.aws/cloudwatch-agent/cloudwatch-agent",
        )
    check_created_secrets(fail, "ecs", ecs.secrets, ecs.copy_images)


def check_ecs_gpu_type(fail: Fail, field: str, instance_type: str, catalogue: InstanceCatalogue) -> None:
    check_gpu_type(fail, field, instance_type, catalogue, "ECS")


def check_worker_fits(fail: Fail, ecs: EcsConfig, instance_type: str, catalogue: InstanceCatalogue) -> None:
    """The GPU worker and the host metrics agent fit one instance of `instance_type`."""
    instance = catalogue.instance_types.get(instance_type)
    worker, agent = ecs.services.get("gpu_worker"), ecs.services.get("cloudwatch_agent")
    if not (instance and worker and agent):
        return
    # ECS keeps some memory for the OS and agent; leave ~6% of the instance free.
    usable_mib = int(instance.memory_gib * 1024 * 0.94)
    if worker.memory_mib + HOST_AGENT_MEMORY_MIB > usable_mib:
        fail(
            "ecs.services.gpu_worker.memory_mib",
            worker.memory_mib,
            f"with the metrics agent ({HOST_AGENT_MEMORY_MIB} MiB) it does not fit a {instance_type} "
            f"({usable_mib} MiB usable)",
            f"set it to {usable_mib - HOST_AGENT_MEMORY_MIB} or less, or use a larger instance type",
        )
    if worker.cpu + HOST_AGENT_CPU > instance.vcpus * 1024:
        fail(
            "ecs.services.gpu_worker.cpu",
            worker.cpu,
            f"with the metrics agent ({HOST_AGENT_CPU} units) it exceeds a {instance_type}'s "
            f"{instance.vcpus * 1024} CPU units",
            f"set it to {instance.vcpus * 1024 - HOST_AGENT_CPU} or less",
        )


# What the config asks of every route (sonic_deploy/routes/route.py, RouteRules).


def check(
    fail: Fail, name: str, env: EnvironmentConfig, catalogue: InstanceCatalogue, zones: list[str]
) -> None:
    # Imported here: the capacity rules import this module's checks.
    from sonic_deploy.routes.ecs.capacity_rules import check_ecs_capacity

    check_ecs(fail, env, catalogue, zones)
    check_ecs_capacity(fail, name, env, catalogue, zones)
    assert env.ecs is not None  # check_ecs refuses a missing table
    check_api(fail, "ecs", name, env, env.ecs.api, env.ecs.deregistration_delay_s)


def check_limits(fail: Fail, env: EnvironmentConfig) -> None:
    if env.ecs is not None:
        check_api_limits(fail, "ecs", env.ecs.api)


def public_subnets(env: EnvironmentConfig) -> bool:
    return env.ecs is not None and env.ecs.nat_gateways > 0


def alarm_emails(env: EnvironmentConfig) -> list[str] | None:
    return env.ecs.alarms.email if env.ecs is not None else None


placeholders = ecs_placeholders


def licence(env: EnvironmentConfig) -> tuple[LicenceSettings, SecretsConfig] | None:
    return (env.ecs, env.ecs.secrets) if env.ecs is not None else None


# The closed variant's switches in the environment's file (regular expression, replacement), each matched once:
# air-gapped with no NAT gateway, TLS from a Private CA with deletion protection, the resilience rehearsal, the
# probe task's turn hops, and [ecs.capacity]'s types, targeted reservations and fallback AZ.
CLOSED = (
    (r'(?m)^licence_mode = "connected"', 'licence_mode = "air-gapped"'),
    (r"(?m)^nat_gateways = \d+", "nat_gateways = 0"),
    (r"(?m)^tls = false$", PRIVATE_CA_TLS),
    (r"(?m)^enabled = false$", "enabled = true"),  # [ecs.resilience]
    (r'(?m)^# turn_hops = \["transcribe", "bedrock"\]$', 'turn_hops = ["transcribe", "bedrock"]'),  # [probe]
    (r"(?m)^# \[ecs\.capacity\]$", "[ecs.capacity]"),
    (r"(?m)^# instance_types = ", "instance_types = "),
    (r'(?m)^# reservations = "targeted"', 'reservations = "targeted"'),
    (r"(?m)^# \[\[ecs\.capacity\.reservation\]\].*$", "[[ecs.capacity.reservation]]"),
    (r'(?m)^# id = "cr-0123456789abcdef0"$', 'id = "cr-0123456789abcdef0"'),
    (r'(?m)^# availability_zone = "us-east-2a"$', 'availability_zone = "us-east-2a"'),
    (r'(?m)^# instance_type = "g6e.xlarge"$', 'instance_type = "g6e.xlarge"'),
    (r"(?m)^# \[ecs\.capacity\.fallback\].*$", "[ecs.capacity.fallback]"),
    (r'(?m)^# availability_zone = "us-east-2b"$', 'availability_zone = "us-east-2b"'),
)


def closed_variants(env: EnvironmentConfig) -> list[ClosedVariant]:
    if env.ecs is None or env.ecs.licence_mode != "connected":
        return []
    return [ClosedVariant("closed", "air-gapped, TLS, FIS", CLOSED)]
