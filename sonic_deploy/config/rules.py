"""Rules that need more than one field or file; each failure names the exact field and its fix."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import NoReturn, Protocol

from sonic_deploy.config.aws_limits import check_aws_limits
from sonic_deploy.config.catalogue import InstanceCatalogue
from sonic_deploy.config.errors import MISSING, ConfigError
from sonic_deploy.config.explain import toml_path
from sonic_deploy.config.schema import LOG_RETENTION_DAYS, CanaryConfig, EnvironmentConfig, ModelPackages
from sonic_deploy.config.service_addresses import check_address_variables
from sonic_deploy.config.tags import check_tags
from sonic_deploy.config.zones import REFRESH_COMMAND, known_zones
from sonic_deploy.routes.ecs.config import NATS_ROUTE_PORT, SERVICE_NAMESPACE, EcsConfig

DEFAULT_ENVIRONMENT = "dev"
# The canary's first-audio p95 alarm: its window, and the runs that must land in it (canary_alarms.py).
CANARY_TTFA_WINDOW_MINUTES = 15
CANARY_TTFA_WINDOW_RUNS = 3
# The first CloudWatch agent release that merges CW_OTEL_CONFIG_CONTENT (the histogram form of worker TTFA).
OTEL_MERGE_AGENT_VERSION = (1, 300066, 0)
INSTANCE_TYPES_FILE = "instance_types.toml"
MODEL_PACKAGE_ARN = re.compile(
    r"^arn:aws(?:-[a-z]+)*:sagemaker:(?P<region>[a-z]{2,4}(?:-[a-z]+)+-\d{1,2}):(?P<account>\d{12}):"
    r"model-package/[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:/\d+)?$"
)
# A Region code: partition prefix, geography, number (botocore's endpoints.json regionRegex of each
# partition, e.g. ^(us|eu|ap|sa|ca|me|af|il|mx)-\w+-\d+$ for aws, ^eusc-(de)-\w+-\d+$ for aws-eusc, the
# AWS European Sovereign Cloud, whose eusc-de-east-1 is a real Region; a four-letter prefix and a number
# past 9 are allowed). Whether the Region exists is the zone list's to say.
REGION = re.compile(r"[a-z]{2,4}(?:-[a-z]+)+-\d{1,2}")
# Region prefix -> partition, longest first; any other Region is in `aws`.
PARTITIONS = (
    ("us-isob-", "aws-iso-b"),
    ("us-isof-", "aws-iso-f"),
    ("eu-isoe-", "aws-iso-e"),
    ("us-iso-", "aws-iso"),
    ("us-gov-", "aws-us-gov"),
    ("cn-", "aws-cn"),
)
# "The connection idle timeout for TLS listeners is 350 seconds and can't be modified" (Elastic Load
# Balancing, "Update the TCP idle timeout for your Network Load Balancer listener").
TLS_IDLE_TIMEOUT_S = 350
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
# A DNS name as ACM takes it (labels of letters, digits and hyphens, at most 253 characters); a wildcard
# certificate's name is not something an agent dials, so not here.
DOMAIN_NAME = re.compile(
    r"(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z][a-z0-9-]{0,61}[a-z0-9]"
)


class Fail(Protocol):
    def __call__(self, field: str, value: object, problem: str, fix: str) -> NoReturn: ...


def check_catalogue(path: Path, catalogue: InstanceCatalogue) -> None:
    for name, row in catalogue.instance_types.items():
        if row.gpu not in catalogue.gpus:
            raise ConfigError(
                file=path,
                field=toml_path(["instance_types", name, "gpu"]),
                value=row.gpu,
                problem="GPU model not described under [gpus]",
                fix=f"add a [gpus.{row.gpu}] table or use one of {', '.join(catalogue.gpus)}",
            )
    # GPU -> the first instance type that uses it (named when a version has no figure for that GPU).
    used_gpus = {row.gpu: name for name, row in reversed(catalogue.instance_types.items())}
    for version, figures in catalogue.concurrency.items():
        table = toml_path(["concurrency", version])
        for gpu in figures.per_gpu:
            if gpu not in catalogue.gpus:
                raise ConfigError(
                    file=path,
                    field=f"{table}.{toml_path(['per_gpu', gpu])}",
                    value=gpu,
                    problem="GPU model not described under [gpus]",
                    fix=f"add a [gpus.{gpu}] table or use one of {', '.join(catalogue.gpus)}",
                )
        for instance_type in figures.per_instance:
            if instance_type not in catalogue.instance_types:
                raise ConfigError(
                    file=path,
                    field=f"{table}.{toml_path(['per_instance', instance_type])}",
                    value=instance_type,
                    problem="instance type not described under [instance_types]",
                    fix=f'add an [instance_types."{instance_type}"] table, or correct the name',
                )
        for gpu, instance_type in used_gpus.items():
            if gpu not in figures.per_gpu:
                raise ConfigError(
                    file=path,
                    field=f"{table}.{toml_path(['per_gpu', gpu])}",
                    value=MISSING,
                    problem=f"no concurrency figure for {gpu} (used by {instance_type}) under {version}",
                    fix=f"add a [{table}.per_gpu.{gpu}] table with streams and source",
                )


def check_packages(path: Path, packages: ModelPackages) -> None:
    for version, by_region in packages.versions.items():
        for region, arn in by_region.items():
            field = toml_path(["versions", version, region])
            wrong_region = check_region(region)
            if wrong_region is not None:
                problem, fix = wrong_region
                raise ConfigError(file=path, field=field, value=region, problem=problem, fix=fix)
            match = MODEL_PACKAGE_ARN.fullmatch(arn)  # `$` with match() lets a trailing newline through
            if match is None:
                raise ConfigError(
                    file=path,
                    field=field,
                    value=arn,
                    problem="not a SageMaker model-package ARN",
                    fix="copy the ARN from SageMaker AI > Model packages > My subscriptions; it looks like "
                    "arn:aws:sagemaker:<region>:<12-digit account>:model-package/<name>",
                )
            if match["region"] != region:
                raise ConfigError(
                    file=path,
                    field=field,
                    value=arn,
                    problem=f"the ARN is for {match['region']}, not {region}",
                    fix=f"move it under `{match['region']} = ...` or use the {region} ARN",
                )
    listed = {arn for by_region in packages.versions.values() for arn in by_region.values()}
    for arn in packages.unconfirmed:
        if arn not in listed:
            raise ConfigError(
                file=path,
                field="unconfirmed",
                value=arn,
                problem="not one of the ARNs listed under [versions]",
                fix="remove it from `unconfirmed`, or correct it to match the ARN it stands for",
            )


def check_region(region: str) -> tuple[str, str] | None:
    """What is wrong with `region` as an AWS Region, as (problem, fix), or None: the one rule for the config's
    `region` and every command's Region option."""
    if not REGION.fullmatch(region):  # not match(): `$` lets "us-east-2\n" through
        return "not an AWS Region name", 'write a Region such as "us-east-2"'
    if region not in known_zones():
        return (
            "not a Region AWS has (sonic_deploy/config/aws_zones.json lists them)",
            f"use one of {', '.join(sorted(known_zones()))}; if AWS has opened it since, run `{REFRESH_COMMAND}`",
        )
    return None


def check_environment(path: Path, name: str, env: EnvironmentConfig, catalogue: InstanceCatalogue) -> None:
    def fail(field: str, value: object, problem: str, fix: str) -> NoReturn:
        raise ConfigError(file=path, field=field, value=value, problem=problem, fix=fix)

    if env.account is None and name != DEFAULT_ENVIRONMENT:
        fail(
            "account",
            MISSING,
            f"only the default environment ({DEFAULT_ENVIRONMENT}) may leave the account out",
            'add `account = "<12-digit AWS account id>"`',
        )
    region_problem = check_region(env.region)
    if region_problem is not None:
        fail("region", env.region, *region_problem)
    check_tags(fail, env.tags)
    _check_fargate_size(fail, "probe", env.probe.cpu, env.probe.memory_mib)
    _check_canary_window(fail, env.canary)
    if env.sonic_version not in catalogue.concurrency:
        fail(
            "sonic_version",
            env.sonic_version,
            f"unknown Sonic version (config/{INSTANCE_TYPES_FILE} has no concurrency figures for it)",
            f"use one of {', '.join(sorted(catalogue.concurrency))}, or add "
            f'[concurrency."{env.sonic_version}".per_gpu.<GPU>] tables to config/{INSTANCE_TYPES_FILE}',
        )
    if len(set(env.routes)) != len(env.routes):
        fail("routes", env.routes, "a route is listed twice", "list each route once")
    if env.log_retention_days not in LOG_RETENTION_DAYS:
        fail(
            "log_retention_days",
            env.log_retention_days,
            "CloudWatch Logs does not offer this retention",
            f"use one of {', '.join(map(str, LOG_RETENTION_DAYS))}",
        )
    if env.network.flow_log_retention_days not in LOG_RETENTION_DAYS:
        fail(
            "network.flow_log_retention_days",
            env.network.flow_log_retention_days,
            "CloudWatch Logs does not offer this retention",
            f"use one of {', '.join(map(str, LOG_RETENTION_DAYS))}",
        )

    net = env.network
    zones = net.zones
    zones_field = (
        "network.existing_vpc.availability_zones" if net.existing_vpc else "network.availability_zones"
    )
    if len(set(zones)) < 2:
        fail(
            zones_field,
            zones,
            "fewer than two distinct Availability Zones (SageMaker's VpcConfig needs subnets in two AZs)",
            f'name two or more, e.g. ["{env.region}a", "{env.region}b"]',
        )
    region_zones = known_zones()[env.region]
    for zone in zones:
        if zone not in region_zones:
            fail(
                zones_field,
                zone,
                f"not an Availability Zone of {env.region}",
                f"use {', '.join(region_zones)}; if your account lists it (aws ec2 describe-availability-zones), "
                f"run `{REFRESH_COMMAND}` to add it",
            )
    if net.existing_vpc and len(net.existing_vpc.private_subnet_ids) != len(
        net.existing_vpc.availability_zones
    ):
        fail(
            "network.existing_vpc.private_subnet_ids",
            net.existing_vpc.private_subnet_ids,
            "needs one private subnet per Availability Zone, in the same order",
            "list as many subnet ids as availability_zones",
        )
    existing = net.existing_vpc
    if existing and len(existing.private_route_table_ids) != len(existing.private_subnet_ids):
        fail(
            "network.existing_vpc.private_route_table_ids",
            existing.private_route_table_ids,
            "the stacks add an S3 gateway endpoint (model data, image layers) to the private subnets' route tables",
            "list each private subnet's route table id, in the same order as private_subnet_ids",
        )

    if not net.existing_vpc:
        public = env.ecs is not None and "ecs" in env.routes and env.ecs.nat_gateways > 0
        _check_cidr(fail, net.cidr, zones, public_subnets=public)
        _check_route_cidrs(fail, env, zones)
    _check_client_cidrs(fail, env)
    check_aws_limits(fail, env)

    if "sagemaker" in env.routes:
        _check_sagemaker(fail, env, catalogue)
    if "ecs" in env.routes:
        _check_ecs(fail, env, catalogue, zones)
        _check_ecs_capacity(fail, name, env, catalogue, zones)
        _check_ecs_api(fail, name, env)
    if name != DEFAULT_ENVIRONMENT:
        _check_alarms_reach_someone(fail, env)


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


def _check_alarms_reach_someone(fail: Fail, env: EnvironmentConfig) -> None:
    """Outside the default environment an alarm nobody receives is a silent outage."""
    for route in env.routes:
        alarms = env.sagemaker.alarms if route == "sagemaker" else env.ecs.alarms if env.ecs else None
        if alarms is not None and not alarms.email:
            fail(
                f"{route}.alarms.email",
                [],
                f"no one is subscribed to the {route} route's alarms",
                f'add the on-call address: `email = ["oncall@your-company.com"]` under [{route}.alarms]',
            )


SUBNET_SIZE = 2 ** (32 - 20)  # the Network construct's private subnets are /20


ROUTE_HALVES = ("sagemaker", "ecs")  # network.cidr's lower half, then its upper half


def route_cidrs(cidr: str) -> dict[str, str]:
    """Each route's VPC range within `network.cidr` (already checked): SageMaker the lower half, ECS the
    upper. The two never overlap, so one client VPC can be peered with both, and a route added later does not
    move the other."""
    halves = ipaddress.IPv4Network(cidr).subnets(prefixlen_diff=1)
    return {route: str(half) for route, half in zip(ROUTE_HALVES, halves, strict=True)}


def _check_room(
    fail: Fail,
    field: str,
    cidr: str,
    network: ipaddress.IPv4Network,
    zones: list[str],
    *,
    public: bool,
    share: int,
) -> None:
    """`network` holds `share` VPCs, each a /20 private subnet per AZ and, with NAT, a /20's worth of /24
    public subnets."""
    needed = share * SUBNET_SIZE * (len(zones) + (1 if public else 0))
    if network.num_addresses < needed:
        prefix = 32 - (needed - 1).bit_length()
        what = f"a /20 private subnet in each of {len(zones)} AZs" + (
            " and the public subnets" if public else ""
        )
        fail(
            field,
            cidr,
            "too small: each route's VPC takes half of it, and a half needs " + what
            if share == 2
            else f"too small for {what}",
            f'use a /{prefix} or larger, e.g. "{network.network_address}/{min(prefix, 16)}"',
        )


# "The smallest VPC you can create uses a /28 netmask (16 IPv4 addresses), and the largest uses a /16 netmask
# (65,536 IPv4 addresses)" (Amazon EC2 API Reference, CreateVpc).
VPC_PREFIXES = range(16, 29)
CIDR = re.compile(r"(?:[0-9]{1,3}\.){3}[0-9]{1,3}/[0-9]{1,2}")


def _ipv4_network(
    fail: Fail, field: str, cidr: str, example: str = "10.60.0.0/16", *, vpc: bool = False
) -> ipaddress.IPv4Network:
    """`cidr` as a network: address/prefix in full (CloudFormation takes nothing shorter), host bits zero
    (the fix names the network meant), and for a VPC a /16 to /28."""
    if not CIDR.fullmatch(cidr):
        fail(
            field,
            cidr,
            "not an IPv4 network in CIDR notation (four numbers, a slash, a prefix length)",
            f'write one such as "{example}"',
        )
    try:
        network = ipaddress.IPv4Network(cidr)
    except ValueError as error:
        if "host bits set" in str(error):
            meant = ipaddress.IPv4Network(cidr, strict=False)
            fail(
                field,
                cidr,
                f"host bits set: the range /{meant.prefixlen} starts at {meant.network_address}",
                f'write "{meant}"',
            )
        fail(field, cidr, f"not an IPv4 network ({error})", f'write one such as "{example}"')
    if vpc and network.prefixlen not in VPC_PREFIXES:
        fail(
            field,
            cidr,
            "a VPC's range must be a /16 to a /28 (CreateVpc refuses any other size)",
            f'write one such as "{example}"',
        )
    return network


def _check_cidr(fail: Fail, cidr: str, zones: list[str], *, public_subnets: bool) -> None:
    # Each route gets half (both halves the same size, though only the ECS route has public subnets). The
    # halves are the VPCs, so the whole may be a /15 (two /16 halves) down to a /27.
    network = _ipv4_network(fail, "network.cidr", cidr)
    if network.prefixlen + 1 not in VPC_PREFIXES:
        fail(
            "network.cidr",
            cidr,
            "each route's VPC takes half of this range, and a VPC must be a /16 to a /28",
            'write a /15 to a /27, e.g. "10.60.0.0/16"',
        )
    _check_room(fail, "network.cidr", cidr, network, zones, public=public_subnets, share=2)


def _check_route_cidrs(fail: Fail, env: EnvironmentConfig, zones: list[str]) -> None:
    """Pinned route ranges: valid, large enough, and apart from the other route's (so both can be peered
    with one client VPC)."""
    net = env.network
    ranges = {route: ipaddress.IPv4Network(cidr) for route, cidr in route_cidrs(net.cidr).items()}
    for route, cidr in net.route_cidrs.items():
        field = f"network.route_cidrs.{route}"
        ranges[route] = _ipv4_network(fail, field, cidr, vpc=True)
        public = route == "ecs" and env.ecs is not None and env.ecs.nat_gateways > 0
        _check_room(fail, field, cidr, ranges[route], zones, public=public, share=1)
    used = [route for route in ROUTE_HALVES if route in env.routes]
    if len(used) == 2 and ranges[used[0]].overlaps(ranges[used[1]]):
        fail(
            "network.route_cidrs",
            {route: str(ranges[route]) for route in used},
            "the two routes' VPCs overlap: one client VPC could not be peered with both",
            "give one route another range (moving a deployed route's range replaces its VPC: see "
            'docs/configuration.md, "Network ranges")',
        )


def _check_client_cidrs(fail: Fail, env: EnvironmentConfig) -> None:
    net = env.network
    if net.existing_vpc:
        # An existing VPC's range is AWS's already: valid, but say so here rather than in a construct.
        _ipv4_network(fail, "network.existing_vpc.vpc_cidr", net.existing_vpc.vpc_cidr, vpc=True)
    own = [net.existing_vpc.vpc_cidr] if net.existing_vpc else [net.cidr, *net.route_cidrs.values()]
    workload = [ipaddress.IPv4Network(cidr) for cidr in own]
    for client in net.client_cidrs:
        network = _ipv4_network(fail, "network.client_cidrs", client, example="10.20.0.0/16")
        if any(network.overlaps(own) for own in workload):
            fail(
                "network.client_cidrs",
                client,
                f"overlaps the routes' own range {next(w for w in workload if network.overlaps(w))}: a VPC with "
                "that range cannot be peered or routed to them",
                "give the client VPC a range outside network.cidr, or move network.cidr",
            )


def _check_sagemaker(fail: Fail, env: EnvironmentConfig, catalogue: InstanceCatalogue) -> None:
    sm = env.sagemaker
    gpu_ml_types = sorted(t for t in catalogue.instance_types if t.startswith("ml."))
    if sm.instance_type not in gpu_ml_types:
        fail(
            "sagemaker.instance_type",
            sm.instance_type,
            "not a GPU SageMaker (ml.) instance type",
            f"use one of {', '.join(gpu_ml_types)}, or describe it in config/{INSTANCE_TYPES_FILE}",
        )
    if sm.min_instances < 2:
        fail(
            "sagemaker.min_instances",
            sm.min_instances,
            "fewer than 2 instances (the SageMaker SLA covers only endpoints with more than one instance)",
            "set sagemaker.min_instances to 2 or more",
        )
    if sm.min_instances > sm.max_instances:
        fail(
            "sagemaker.max_instances",
            sm.max_instances,
            f"below min_instances ({sm.min_instances})",
            f"set sagemaker.max_instances to {sm.min_instances} or more",
        )
    if sm.endpoint_name is not None and not re.fullmatch(
        r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", sm.endpoint_name
    ):
        fail(
            "sagemaker.endpoint_name",
            sm.endpoint_name,
            "not a valid SageMaker endpoint name",
            "use up to 63 letters, digits and hyphens, starting with a letter or digit",
        )


ECS_GPU_FAMILIES = ("g6", "g6e", "g7e")
SERVICES = ("api_server", "gpu_worker", "licence_proxy", "nats", "cloudwatch_agent")
FARGATE_SERVICES = ("api_server", "licence_proxy", "nats", "cloudwatch_agent")  # the agent: its scraper task
# The CloudWatch agent on each GPU host (SonicMetrics): ECS keeps its memory free (ECS_RESERVED_MEMORY), and
# the worker leaves it this much CPU.
HOST_AGENT_CPU, HOST_AGENT_MEMORY_MIB = 128, 256
# Fargate's CPU units -> allowed memory (MiB): min, max, step.
FARGATE_SIZES = {
    256: (512, 2048, 512),
    512: (1024, 4096, 1024),
    1024: (2048, 8192, 1024),
    2048: (4096, 16384, 1024),
    4096: (8192, 30720, 1024),
    8192: (16384, 61440, 4096),
    16384: (32768, 122880, 8192),
}


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


def _check_canary_window(fail: Fail, canary: CanaryConfig) -> None:
    """The canary's first-audio alarm takes a p95 over CANARY_TTFA_WINDOW_MINUTES (canary_alarms.py): at
    least CANARY_TTFA_WINDOW_RUNS runs must land in it, or its windows hold one run's values or none. This
    also keeps the run-count alarms' look-back (at most 100 runs of 5 minutes) within the one day CloudWatch
    allows an alarm with a period under an hour (PutMetricAlarm, Period: "For alarms with a period of less
    than one hour ... can't be longer than one day")."""
    most = CANARY_TTFA_WINDOW_MINUTES // CANARY_TTFA_WINDOW_RUNS
    if canary.every_minutes > most:
        fail(
            "canary.every_minutes",
            canary.every_minutes,
            f"a run every {canary.every_minutes} minutes leaves fewer than {CANARY_TTFA_WINDOW_RUNS} runs in the "
            f"{CANARY_TTFA_WINDOW_MINUTES}-minute window of the canary's first-audio p95 alarm",
            f"use at most {most}",
        )


def _check_fargate_size(fail: Fail, field: str, cpu: int, memory_mib: int) -> None:
    if cpu not in FARGATE_SIZES:
        fail(
            f"{field}.cpu", cpu, "not a Fargate CPU size", f"use one of {', '.join(map(str, FARGATE_SIZES))}"
        )
    low, high, step = FARGATE_SIZES[cpu]
    if not (low <= memory_mib <= high and memory_mib % step == 0):
        fail(
            f"{field}.memory_mib",
            memory_mib,
            f"Fargate does not offer this memory with {cpu} CPU units",
            f"use {low} to {high} in steps of {step}",
        )


CREATED_SECRET_PREFIX = "sonic/"


def _check_ecs(fail: Fail, env: EnvironmentConfig, catalogue: InstanceCatalogue, zones: list[str]) -> None:
    ecs = env.ecs
    if ecs is None:
        fail(
            "ecs",
            MISSING,
            'routes include "ecs" but there is no [ecs] table',
            'add an [ecs] table (see config/environments/dev.toml) or remove "ecs" from routes',
        )
    _check_ecs_gpu_type(fail, "ecs.instance_type", ecs.instance_type, catalogue)
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
            _check_fargate_size(fail, f"ecs.services.{name}", spec.cpu, spec.memory_mib)
        _check_plain_environment(fail, name, spec.environment, spec.not_secrets)
    check_address_variables(fail, ecs)
    _check_worker_fits(fail, ecs, ecs.instance_type, catalogue)
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


def _check_ecs_gpu_type(fail: Fail, field: str, instance_type: str, catalogue: InstanceCatalogue) -> None:
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


def _check_worker_fits(fail: Fail, ecs: EcsConfig, instance_type: str, catalogue: InstanceCatalogue) -> None:
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


def _check_ecs_capacity(
    fail: Fail, name: str, env: EnvironmentConfig, catalogue: InstanceCatalogue, zones: list[str]
) -> None:
    """`[ecs.capacity]`: every type usable by the worker, Spot only in the default environment, reservations
    in an AZ and of a type a group launches, Capacity Blocks only for types that offer them, the fallback AZ
    another of the VPC's (docs/routes.md, "The single-AZ trade-off")."""
    ecs = env.ecs
    if ecs is None:
        return
    capacity = ecs.capacity
    table = "ecs.capacity"
    for index, instance_type in enumerate(capacity.instance_types):
        _check_ecs_gpu_type(fail, f"{table}.instance_types[{index}]", instance_type, catalogue)
        _check_worker_fits(fail, ecs, instance_type, catalogue)
    first = [ecs.instance_type, *capacity.instance_types]
    if len(set(first)) != len(first):
        fail(
            f"{table}.instance_types",
            capacity.instance_types,
            f"lists a type twice, or ecs.instance_type ({ecs.instance_type}) again",
            "list each further type once; ecs.instance_type is always tried first",
        )
    fallback = capacity.fallback
    if fallback is not None:
        field = f"{table}.fallback.availability_zone"
        if fallback.availability_zone == ecs.availability_zone:
            fail(
                field,
                fallback.availability_zone,
                "the same AZ as ecs.availability_zone: a fallback must be another AZ",
                f"use another of the VPC's AZs: {', '.join(z for z in zones if z != ecs.availability_zone)}",
            )
        if fallback.availability_zone not in zones:
            fail(
                field,
                fallback.availability_zone,
                "not one of the VPC's Availability Zones",
                f"use one of {', '.join(z for z in zones if z != ecs.availability_zone)}, or add it to the VPC's "
                "availability_zones",
            )
        for index, instance_type in enumerate(fallback.instance_types):
            _check_ecs_gpu_type(fail, f"{table}.fallback.instance_types[{index}]", instance_type, catalogue)
            _check_worker_fits(fail, ecs, instance_type, catalogue)
        scale_out_s = ecs.instance_warmup_s + ecs.worker_start_period_s
        if fallback.after_minutes * 60 <= scale_out_s:
            fail(
                f"{table}.fallback.after_minutes",
                fallback.after_minutes,
                f"no longer than a normal scale-out in the first AZ (instance_warmup_s + worker_start_period_s "
                f"= {scale_out_s} s): every scale-out would start overflow workers in the fallback AZ",
                f"set it to {scale_out_s // 60 + 1} or more",
            )
        if len(set(fallback.instance_types)) != len(fallback.instance_types):
            fail(
                f"{table}.fallback.instance_types",
                fallback.instance_types,
                "lists a type twice",
                "list each type once",
            )
    if capacity.market == "spot" and name != DEFAULT_ENVIRONMENT:
        fail(
            f"{table}.market",
            "spot",
            f"Spot instances are interrupted with two minutes' notice: only the default environment "
            f"({DEFAULT_ENVIRONMENT}) may use them",
            'set market = "on-demand" (or leave it out)',
        )
    if capacity.reservations != "targeted" and capacity.reservations_only:
        fail(
            f"{table}.reservations_only",
            True,
            f'only targeted reservations can be the only capacity (reservations = "{capacity.reservations}")',
            'set reservations = "targeted" and list them, or leave reservations_only out',
        )
    if capacity.reservations == "targeted" and not capacity.reservation:
        fail(
            f"{table}.reservation",
            MISSING,
            'reservations = "targeted" but no reservation is listed',
            "add [[ecs.capacity.reservation]] tables (id, availability_zone, instance_type), or set "
            'reservations = "open"',
        )
    if capacity.reservation and capacity.market == "spot":
        fail(
            f"{table}.market",
            "spot",
            "capacity reservations hold On-Demand (or Capacity Block) capacity, which Spot instances do not use",
            'set market = "on-demand", or remove the [[ecs.capacity.reservation]] tables',
        )
    if capacity.reservation and capacity.reservations == "none":
        fail(
            f"{table}.reservations",
            "none",
            "reservations are listed but the groups are told never to use one",
            'set reservations = "targeted" (or "open"), or remove the [[ecs.capacity.reservation]] tables',
        )
    by_zone = ecs.zone_instance_types()
    seen: set[str] = set()
    for index, reservation in enumerate(capacity.reservation):
        entry = f"{table}.reservation[{index}]"
        if reservation.id in seen:
            fail(f"{entry}.id", reservation.id, "listed twice", "list each reservation once")
        seen.add(reservation.id)
        types = by_zone.get(reservation.availability_zone)
        if types is None:
            fail(
                f"{entry}.availability_zone",
                reservation.availability_zone,
                "no GPU group launches in this AZ, so the reservation would never be used",
                f"use {' or '.join(by_zone)} (ecs.availability_zone"
                + (", or the fallback's)" if fallback else ")")
                + ", or remove the reservation",
            )
        if reservation.instance_type not in types:
            fail(
                f"{entry}.instance_type",
                reservation.instance_type,
                f"the group in {reservation.availability_zone} does not launch this type ({', '.join(types)})",
                "add it to the group's instance types, or correct the type",
            )
        if reservation.kind == "capacity-block":
            fail(
                f"{entry}.kind",
                "capacity-block",
                'EC2 offers Capacity Blocks for ML for P and Trn types only (EC2 User Guide, "Capacity Blocks for '
                'ML"), and the ECS route runs G types',
                'use kind = "on-demand" with an On-Demand Capacity Reservation',
            )
    if capacity.reservations_only:
        bare = [zone for zone in by_zone if not ecs.reservation_ids(zone)]
        if bare:
            fail(
                f"{table}.reservations_only",
                True,
                f"the group in {', '.join(bare)} has no listed reservation, so with only reservations it could "
                "never launch",
                f"list a reservation in {', '.join(bare)}, or leave reservations_only out (reservations first, "
                "then On-Demand)",
            )


def partition(region: str) -> str:
    return next((name for prefix, name in PARTITIONS if region.startswith(prefix)), "aws")


def _check_ecs_api(fail: Fail, name: str, env: EnvironmentConfig) -> None:
    """TLS on the ECS route's load balancer: on outside the default environment unless turned off, and then
    with a certificate that ACM can attach to a listener in this Region. ARNs are matched whole
    (`re.fullmatch`: a pasted trailing newline is refused, where `$` would let it through)."""
    assert env.ecs is not None
    api = env.ecs.api
    tls = api.tls if api.tls is not None else name != DEFAULT_ENVIRONMENT
    arn_partition, region = partition(env.region), re.escape(env.region)
    certificate = rf"arn:{arn_partition}:acm:{region}:\d{{12}}:certificate/{UUID}"
    authority = rf"arn:{arn_partition}:acm-pca:{region}:\d{{12}}:certificate-authority/{UUID}"
    fix_source = (
        f'certificate_arn = "arn:{arn_partition}:acm:{env.region}:<account>:certificate/<id>" (imported into '
        f'or issued by ACM in {env.region}), or private_ca_arn = "arn:{arn_partition}:acm-pca:{env.region}:'
        '<account>:certificate-authority/<id>" and the stack has ACM issue one'
    )
    if api.certificate_arn is not None and not re.fullmatch(certificate, api.certificate_arn):
        fail(
            "ecs.api.certificate_arn",
            api.certificate_arn,
            f"not an ACM certificate ARN in {env.region} (partition {arn_partition}): a listener takes only a "
            "certificate of its own Region",
            f'copy the ARN from ACM in {env.region}: "arn:{arn_partition}:acm:{env.region}:<account>:'
            'certificate/<id>"',
        )
    if api.private_ca_arn is not None and not re.fullmatch(authority, api.private_ca_arn):
        fail(
            "ecs.api.private_ca_arn",
            api.private_ca_arn,
            f"not an AWS Private CA ARN in {env.region} (partition {arn_partition}): a private CA is Regional "
            "and issues ACM certificates in its own Region only",
            f'copy the ARN from AWS Private CA in {env.region}: "arn:{arn_partition}:acm-pca:{env.region}:'
            '<account>:certificate-authority/<id>"',
        )
    if api.certificate_arn is not None and api.private_ca_arn is not None:
        fail(
            "ecs.api.private_ca_arn",
            api.private_ca_arn,
            "both certificate_arn and private_ca_arn are set: the listener takes one certificate",
            "keep certificate_arn (a certificate you have) or private_ca_arn (the stack has one issued)",
        )
    if api.domain_name is not None and not DOMAIN_NAME.fullmatch(api.domain_name):
        fail(
            "ecs.api.domain_name",
            api.domain_name,
            "not a DNS name in lower case (labels of letters, digits and hyphens, separated by dots)",
            'write the name agents dial, e.g. "sonic.internal.example.com"',
        )
    # Plain text outside dev only when a second, deliberately named setting accepts it: a dev [ecs.api]
    # block copied elsewhere must not ship the API key in clear by accident.
    if not tls and name != DEFAULT_ENVIRONMENT and not api.allow_plaintext_outside_dev:
        fail(
            "ecs.api.tls",
            False,
            f"outside the default environment ({DEFAULT_ENVIRONMENT}) a plain listener (ws://) would carry the "
            "API key, transcripts and audio in clear inside the VPC",
            f"remove tls = false and set domain_name and {fix_source}; or, to accept plain text here on "
            "purpose, add allow_plaintext_outside_dev = true under [ecs.api]",
        )
    if api.allow_plaintext_outside_dev and (tls or name == DEFAULT_ENVIRONMENT):
        fail(
            "ecs.api.allow_plaintext_outside_dev",
            True,
            "TLS is on here, so it accepts nothing"
            if tls
            else f"the default environment ({DEFAULT_ENVIRONMENT}) is plain unless tls = true: it accepts nothing",
            "remove it",
        )
    if not tls:
        return
    why = "TLS is on by default outside dev" if api.tls is None else "ecs.api.tls = true"
    if api.certificate_arn is None and api.private_ca_arn is None:
        fail(
            "ecs.api.certificate_arn",
            MISSING,
            f"{why}, and the listener has no certificate source",
            f"set {fix_source}; or, to serve ws:// in clear inside the VPC on purpose, `tls = false` and "
            "`allow_plaintext_outside_dev = true` under [ecs.api]",
        )
    if env.ecs.deregistration_delay_s > TLS_IDLE_TIMEOUT_S:
        fail(
            "ecs.deregistration_delay_s",
            env.ecs.deregistration_delay_s,
            f"{why}, and a TLS listener's idle timeout is fixed at {TLS_IDLE_TIMEOUT_S} s (nlb_idle_timeout_s "
            "applies to TCP listeners only): a call that pauses while its API server drains would be cut first",
            f"set it to {TLS_IDLE_TIMEOUT_S} or less",
        )
    if api.domain_name is None:
        fail(
            "ecs.api.domain_name",
            MISSING,
            f"{why}: agents check the certificate against the host they dial, so the URL needs that name",
            'set domain_name = "<the name the certificate covers>" and point it (a private DNS record) at the '
            "stack output LoadBalancerDnsName",
        )
    # The probe task (canary, --in-vpc) trusts only the public CAs of its image's bundle, and an in-VPC run
    # cannot take --ca-bundle: a certificate of a private CA fails every canary run's TLS handshake.
    canary = env.canary.enabled if env.canary.enabled is not None else name != DEFAULT_ENVIRONMENT
    if canary and api.private_ca_arn is not None:
        fail(
            "canary.enabled",
            canary,
            "the canary's probe task trusts only public CAs, and ecs.api.private_ca_arn issues the listener a "
            "certificate of a private one: every run would fail its TLS handshake",
            "set enabled = false under [canary], or a publicly trusted ecs.api.certificate_arn instead of "
            "private_ca_arn",
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
