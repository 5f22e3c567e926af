"""The rules of the ECS route's `[ecs]` table that need more than one field or file: the services, their
secrets and plain variables, NATS's cluster, the GPU worker on its instance. The capacity's are in
`capacity_rules.py`, the API's load balancer's in `api_rules.py`, the peers' addresses in
`service_addresses.py`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sonic_deploy.config.catalogue import INSTANCE_TYPES_FILE, InstanceCatalogue
from sonic_deploy.config.errors import MISSING, Fail
from sonic_deploy.config.explain import toml_path
from sonic_deploy.config.fargate import check_fargate_size
from sonic_deploy.routes.ecs.config import NATS_ROUTE_PORT, SERVICE_NAMESPACE, EcsConfig
from sonic_deploy.routes.ecs.placeholders import placeholders as ecs_placeholders
from sonic_deploy.routes.ecs.service_addresses import check_address_variables

if TYPE_CHECKING:
    from sonic_deploy.config.schema import EnvironmentConfig

# The first CloudWatch agent release that merges CW_OTEL_CONFIG_CONTENT (the histogram form of worker TTFA).
OTEL_MERGE_AGENT_VERSION = (1, 300066, 0)


# Secrets Manager names (CreateSecret, Name): 1 to 512 ASCII letters, digits and /_+=.@- . (Its advice not
# to end a name in a hyphen and six characters is about lookups by partial ARN, which the stacks do not make:
# a name such as prod/db-secret is left alone.)
SECRET_NAME = re.compile(r"[A-Za-z0-9/_+=.@-]{1,512}")


def _check_secret_name(fail: Fail, field: str, name: str) -> None:
    if not SECRET_NAME.fullmatch(name):
        fail(
            field,
            name,
            "not a Secrets Manager secret name (1 to 512 ASCII letters, digits and / _ + = . @ -)",
            'write the secret\'s name, not its ARN, e.g. "sonic/prod/cartesia-api-key"',
        )


# A path inside a container, as ECS takes it in a mount point: absolute, no `..` that could leave the volume.
CONTAINER_PATH = re.compile(r"/(?:[A-Za-z0-9._@+=-]+/?)*")


def _check_container_path(fail: Fail, field: str, path: str) -> None:
    if not CONTAINER_PATH.fullmatch(path) or ".." in path.split("/") or len(path) > 4096:
        fail(
            field,
            path,
            "not an absolute path inside the container (starts with /; letters, digits and . _ - @ + = ; no ..)",
            'write one such as "/data"',
        )


ECS_GPU_FAMILIES = ("g6", "g6e", "g7e")
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


CREATED_SECRET_PREFIX = "sonic/"


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
    if ecs.min_workers < 2:
        fail(
            "ecs.min_workers",
            ecs.min_workers,
            "fewer than 2 GPU workers (one failure would stop all speech)",
            "set ecs.min_workers to 2 or more",
        )
    if ecs.min_workers > ecs.max_workers:
        fail(
            "ecs.max_workers",
            ecs.max_workers,
            f"below min_workers ({ecs.min_workers})",
            f"set ecs.max_workers to {ecs.min_workers} or more",
        )
    if ecs.api_server_tasks < 2:
        fail(
            "ecs.api_server_tasks",
            ecs.api_server_tasks,
            "fewer than 2 API server tasks",
            "set ecs.api_server_tasks to 2 or more",
        )
    _check_nats_cluster(fail, ecs)
    _check_secret_name(fail, "ecs.secrets.api_key", ecs.secrets.api_key)
    _check_secret_name(fail, "ecs.secrets.registry_credentials", ecs.secrets.registry_credentials)
    if ecs.secrets.licence is not None:
        _check_secret_name(fail, "ecs.secrets.licence", ecs.secrets.licence)
    _check_container_path(fail, "ecs.licence_data_path", ecs.licence_data_path)
    for service in SERVICES:
        if service not in ecs.services:
            fail(
                f"ecs.services.{service}",
                MISSING,
                "no image configured for this service",
                f"add an [ecs.services.{service}] table with source, tag and port (from Cartesia's bundle)",
            )
    for name, spec in ecs.services.items():
        if name not in ("cloudwatch_agent", "licence_loader") and spec.port is None:
            fail(
                f"ecs.services.{name}.port",
                MISSING,
                "this service needs the port it serves on",
                f"add `port = ...` to [ecs.services.{name}] (from Cartesia's bundle)",
            )
        if name in FARGATE_SERVICES:
            check_fargate_size(fail, f"ecs.services.{name}", spec.cpu, spec.memory_mib)
        _check_plain_environment(fail, name, spec.environment, spec.not_secrets)
    check_address_variables(fail, ecs)
    check_worker_fits(fail, ecs, ecs.instance_type, catalogue)
    if ecs.nlb_idle_timeout_s < ecs.deregistration_delay_s:
        fail(
            "ecs.nlb_idle_timeout_s",
            ecs.nlb_idle_timeout_s,
            f"shorter than deregistration_delay_s ({ecs.deregistration_delay_s}): a call that pauses between "
            "utterances while its API server drains would be cut by the idle timeout first",
            f'set it to {ecs.deregistration_delay_s} or more (docs/operate.md, "What a deploy does to a live call")',
        )
    if ecs.licence_mode == "air-gapped" and "licence_loader" not in ecs.services:
        fail(
            "ecs.services.licence_loader",
            MISSING,
            "air-gapped mode loads the licence into the proxy with a small shell image, and none is configured",
            '[ecs.services.licence_loader] source = "public.ecr.aws/docker/library/busybox", tag = "1.37", '
            "private_registry = false (any image with sh, wget and base64)",
        )
    if ecs.licence_mode == "air-gapped" and ecs.nat_gateways > 0:
        fail(
            "ecs.nat_gateways",
            ecs.nat_gateways,
            "air-gapped mode must have no egress, but a NAT gateway gives the containers a way out",
            'set ecs.nat_gateways = 0, or licence_mode = "connected"',
        )
    if ecs.licence_mode == "connected" and ecs.nat_gateways == 0:
        fail(
            "ecs.nat_gateways",
            0,
            "connected mode needs HTTPS egress for licensing and model artifacts",
            'set ecs.nat_gateways = 1, or licence_mode = "air-gapped"',
        )
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
    if ecs.secrets.create and ecs.copy_images:
        fail(
            "ecs.secrets.create",
            True,
            "the image copy would run before you can store the registry "
            "credentials in the secrets the stack creates",
            "create the secrets yourself first and import them by name (create = false), or keep "
            'copy_images = false and copy the images by hand (docs/routes.md, "Copy the images")',
        )
    # The bootstrap policy lets CloudFormation create and delete secrets under sonic/ only (docs/deploy.md).
    for field in ("api_key", "registry_credentials") if ecs.secrets.create else ():
        name = getattr(ecs.secrets, field)
        if not name.startswith(CREATED_SECRET_PREFIX):
            fail(
                f"ecs.secrets.{field}",
                name,
                f"the stack creates this secret (create = true), and `make bootstrap`'s execution policy lets "
                f"CloudFormation manage only secrets whose names start with {CREATED_SECRET_PREFIX}",
                f'name it "{CREATED_SECRET_PREFIX}<env>/...", or create it yourself and set create = false',
            )


def check_ecs_gpu_type(fail: Fail, field: str, instance_type: str, catalogue: InstanceCatalogue) -> None:
    """A GPU type of a family the route supports, described in the catalogue, with one GPU (one worker per
    instance, and a worker uses one GPU)."""
    ec2_types = sorted(
        t
        for t, row in catalogue.instance_types.items()
        if not t.startswith("ml.") and t.split(".")[0] in ECS_GPU_FAMILIES and row.gpus == 1
    )
    if instance_type.split(".")[0] not in ECS_GPU_FAMILIES or instance_type not in ec2_types:
        fail(
            field,
            instance_type,
            f"not a one-GPU instance type of a family the ECS route supports ({', '.join(ECS_GPU_FAMILIES)})",
            f"use one of {', '.join(ec2_types)}, or describe it in config/{INSTANCE_TYPES_FILE}",
        )


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


# Parts of an environment variable's name (split at `_` and other separators, and at camelCase humps) that say
# it holds a secret. Whole parts only: WORKER_REPLICAS, KEYBOARD_LAYOUT and TOKENIZER_PATH are settings; API_KEY, DB_PASSWORD and AuthToken are
# not. (SESSION, CERT and the like are left out: SESSION_TIMEOUT and CERT_PATH are settings.)
SECRET_NAME_PARTS = frozenset(
    {
        "KEY", "KEYS", "APIKEY", "SECRET", "SECRETS", "TOKEN", "TOKENS", "PASSWORD", "PASSWORDS", "PASSWD",
        "PWD", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "CREDS", "PRIVATE", "AUTH", "OAUTH", "BEARER",
    }
)  # fmt: skip


def secret_name_part(variable: str) -> str | None:
    """The part of `variable` that names it a secret, if one does (camelCase is split too: AuthToken)."""
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+", variable)
    return next((word.upper() for word in words if word.upper() in SECRET_NAME_PARTS), None)


class _NotShown:
    def __repr__(self) -> str:
        return "(value not shown)"


def _check_plain_environment(
    fail: Fail, service: str, environment: dict[str, str], not_secrets: list[str]
) -> None:
    """ECS writes plain variables into the task definition, where anyone who may describe it reads them
    (and cdk-nag's AwsSolutions-ECS2 is acknowledged only because this check holds)."""
    for variable in not_secrets:
        if variable not in environment:
            fail(
                f"ecs.services.{service}.not_secrets",
                variable,
                "not a variable of this service's environment",
                f"remove it from not_secrets, or add it to environment in [ecs.services.{service}]",
            )
    for variable in environment:
        part = secret_name_part(variable)
        if part is not None and variable not in not_secrets:
            fail(
                toml_path(["ecs", "services", service, "environment", variable]),
                _NotShown(),
                f"named like a secret ({part}), but a plain variable is stored in the task definition, readable "
                "by anyone who may describe it",
                f'keep the value in Secrets Manager and write secrets = {{ {variable} = "<name in [ecs.secrets]>" }} '
                f'in [ecs.services.{service}] instead; or, if it holds no secret, not_secrets = ["{variable}"]',
            )


# What the config asks of every route (sonic_deploy/routes/route.py, RouteRules).


def check(
    fail: Fail, name: str, env: EnvironmentConfig, catalogue: InstanceCatalogue, zones: list[str]
) -> None:
    # Imported here: the capacity and API rules import this module's checks.
    from sonic_deploy.routes.ecs.api_rules import check_ecs_api
    from sonic_deploy.routes.ecs.capacity_rules import check_ecs_capacity

    check_ecs(fail, env, catalogue, zones)
    check_ecs_capacity(fail, name, env, catalogue, zones)
    check_ecs_api(fail, name, env)


def check_limits(fail: Fail, env: EnvironmentConfig) -> None:
    from sonic_deploy.routes.ecs.api_rules import check_api_limits

    check_api_limits(fail, env)


def public_subnets(env: EnvironmentConfig) -> bool:
    return env.ecs is not None and env.ecs.nat_gateways > 0


def alarm_emails(env: EnvironmentConfig) -> list[str] | None:
    return env.ecs.alarms.email if env.ecs is not None else None


placeholders = ecs_placeholders
