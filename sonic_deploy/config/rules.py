"""Rules that need more than one field or file; each failure names the exact field and its fix. The network's
are in `network.py`, each route's in `sonic_deploy/routes/<route>/`; `check_environment` runs them all."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NoReturn

from sonic_deploy.config.aws_limits import check_aws_limits
from sonic_deploy.config.base import DEFAULT_ENVIRONMENT
from sonic_deploy.config.catalogue import INSTANCE_TYPES_FILE, InstanceCatalogue
from sonic_deploy.config.errors import MISSING, ConfigError, Fail
from sonic_deploy.config.explain import toml_path
from sonic_deploy.config.fargate import check_fargate_size
from sonic_deploy.config.network import check_cidr, check_client_cidrs, check_route_cidrs
from sonic_deploy.config.regions import check_region
from sonic_deploy.config.schema import LOG_RETENTION_DAYS, CanaryConfig, EnvironmentConfig, ModelPackages
from sonic_deploy.config.tags import check_tags
from sonic_deploy.config.zones import REFRESH_COMMAND, known_zones
from sonic_deploy.routes import ROUTES

# The canary's first-audio p95 alarm: its window, and the runs that must land in it (canary_alarms.py).
CANARY_TTFA_WINDOW_MINUTES = 15
CANARY_TTFA_WINDOW_RUNS = 3
MODEL_PACKAGE_ARN = re.compile(
    r"^arn:aws(?:-[a-z]+)*:sagemaker:(?P<region>[a-z]{2,4}(?:-[a-z]+)+-\d{1,2}):(?P<account>\d{12}):"
    r"model-package/[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:/\d+)?$"
)


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
    for version, supported in catalogue.model_package.items():
        for instance_type in supported.instance_types:
            if not (instance_type.startswith("ml.") and instance_type in catalogue.instance_types):
                raise ConfigError(
                    file=path,
                    field=toml_path(["model_package", version, "instance_types"]),
                    value=instance_type,
                    problem="not a SageMaker (ml.) type described under [instance_types]",
                    fix=f'add an [instance_types."{instance_type}"] table, or correct the name',
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
    check_fargate_size(fail, "probe", env.probe.cpu, env.probe.memory_mib)
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

    used = [route for route in ROUTES.values() if route.name in env.routes]  # in the registry's order
    if not net.existing_vpc:
        public = any(route.rules_module().public_subnets(env) for route in used)
        check_cidr(fail, net.cidr, zones, public_subnets=public)
        check_route_cidrs(fail, env, zones)
    check_client_cidrs(fail, env)
    check_aws_limits(fail, env)
    for route in used:
        route.rules_module().check_limits(fail, env)

    for route in used:
        route.rules_module().check(fail, name, env, catalogue, zones)
    if name != DEFAULT_ENVIRONMENT:
        for route_name in env.routes:  # in the file's order: the first route it lists is named first
            rules = ROUTES[route_name].rules_module()
            _check_alarms_reach_someone(fail, route_name, rules.alarm_emails(env))


def _check_alarms_reach_someone(fail: Fail, route: str, emails: list[str] | None) -> None:
    """Outside the default environment an alarm nobody receives is a silent outage."""
    if emails is not None and not emails:
        fail(
            f"{route}.alarms.email",
            [],
            f"no one is subscribed to the {route} route's alarms",
            f'add the on-call address: `email = ["oncall@your-company.com"]` under [{route}.alarms]',
        )


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
