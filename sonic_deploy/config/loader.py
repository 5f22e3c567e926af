"""Load config/ into one validated `Settings` object, or raise one `ConfigError` that says what to fix."""

from __future__ import annotations

import difflib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from sonic_deploy.config.errors import MISSING, ConfigError
from sonic_deploy.config.schema import (
    LOG_RETENTION_DAYS,
    EnvironmentConfig,
    InstanceCatalogue,
    InstanceType,
    ModelPackages,
)

DEFAULT_ENVIRONMENT = "dev"
ENVIRONMENTS_DIR = "environments"
MODEL_PACKAGES_FILE = "model_packages.toml"
INSTANCE_TYPES_FILE = "instance_types.toml"

MODEL_PACKAGE_ARN = re.compile(
    r"^arn:aws(?:-[a-z]+)*:sagemaker:(?P<region>[a-z]{2}(?:-[a-z]+)+-\d):(?P<account>\d{12}):"
    r"model-package/[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:/\d+)?$"
)
REGION = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d$")

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Settings:
    """Everything the app and the operator tools need for one deployment environment."""

    config_dir: Path
    environment_name: str
    environment: EnvironmentConfig
    model_package_arn: str | None
    catalogue: InstanceCatalogue

    @property
    def sagemaker_instance(self) -> InstanceType:
        return self.catalogue.instance_types[self.environment.sagemaker.instance_type]

    @property
    def sagemaker_streams_per_instance(self) -> int:
        configured = self.environment.sagemaker.streams_per_instance
        if configured is not None:
            return configured
        instance = self.sagemaker_instance
        return instance.gpus * self.catalogue.gpus[instance.gpu].streams_per_gpu

    @property
    def endpoint_name(self) -> str:
        return self.environment.sagemaker.endpoint_name or f"sonic-{self.environment_name}"


def environment_names(config_dir: Path) -> list[str]:
    return sorted(p.stem for p in (config_dir / ENVIRONMENTS_DIR).glob("*.toml"))


def load_settings(config_dir: Path, environment_name: str | None = None) -> Settings:
    """Read and check every file the chosen environment needs. Raises ConfigError, never anything deeper."""
    name = environment_name or DEFAULT_ENVIRONMENT
    env_file = config_dir / ENVIRONMENTS_DIR / f"{name}.toml"
    if not env_file.is_file():
        known = environment_names(config_dir)
        raise ConfigError(
            file=config_dir / ENVIRONMENTS_DIR,
            field="env",
            value=name,
            problem="unknown environment",
            fix=f"use one of {', '.join(known) or '(none yet)'} (`cdk synth -c env=NAME`), "
            f"or create {env_file}",
        )
    environment = _parse(env_file, EnvironmentConfig)
    catalogue = _parse(config_dir / INSTANCE_TYPES_FILE, InstanceCatalogue)
    packages = _parse(config_dir / MODEL_PACKAGES_FILE, ModelPackages)

    _check_catalogue(config_dir / INSTANCE_TYPES_FILE, catalogue)
    _check_packages(config_dir / MODEL_PACKAGES_FILE, packages)
    _check_environment(env_file, name, environment, catalogue)
    arn = _model_package_arn(env_file, config_dir / MODEL_PACKAGES_FILE, environment, packages)
    return Settings(config_dir, name, environment, arn, catalogue)


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(
            file=path,
            field="(file)",
            value=MISSING,
            problem="file not found",
            fix=f"restore {path.name} from the repository",
        )
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(
            file=path,
            field="(syntax)",
            value=MISSING,
            problem=f"not valid TOML: {error}",
            fix="correct the syntax at that line (strings need quotes, tables [brackets])",
        ) from None


def _parse(path: Path, model: type[M]) -> M:
    data = _read_toml(path)
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise _config_error(path, model, error) from None


def _config_error(path: Path, model: type[BaseModel], error: ValidationError) -> ConfigError:
    """The first validation error, rewritten in the user's terms. An unknown key comes first: a misspelt
    key also makes the key it was meant to be look missing."""
    errors = error.errors()
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = [str(part) for part in first["loc"]]
    field = ".".join(loc)
    kind = first["type"]
    if kind == "extra_forbidden":
        known = _known_keys(model, loc[:-1])
        guess = difflib.get_close_matches(loc[-1], known, n=1)
        hint = f"did you mean '{guess[0]}'? " if guess else ""
        return ConfigError(
            file=path,
            field=field,
            value=first["input"],
            problem="unknown key",
            fix=f"{hint}remove or rename it; known keys here: {', '.join(known)}",
        )
    if loc[-1] == "[key]":  # a table keyed by fixed names (e.g. ecs.services): the name is the typo
        field = ".".join(loc[:-1])
        allowed = re.findall(r"'([^']+)'", str(first.get("ctx", {}).get("expected", "")))
        guess = difflib.get_close_matches(str(first["input"]), allowed, n=1)
        hint = f"did you mean '{guess[0]}'? " if guess else ""
        return ConfigError(
            file=path,
            field=field,
            value=first["input"],
            problem="unknown name",
            fix=f"{hint}use one of {', '.join(allowed)}",
        )
    if kind == "missing":
        return ConfigError(
            file=path,
            field=field,
            value=MISSING,
            problem="required key is missing",
            fix=f"add `{loc[-1]} = ...` to {path.name}",
        )
    return ConfigError(
        file=path,
        field=field,
        value=first["input"],
        problem=first["msg"].rstrip("."),
        fix=f"write a value for {field} that satisfies this ({_describe(model, loc)})",
    )


def _field_model(model: type[BaseModel], loc: list[str]) -> type[BaseModel] | None:
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None or part not in current.model_fields:
            return None
        annotation = current.model_fields[part].annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        current = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
    return current


def _known_keys(model: type[BaseModel], loc: list[str]) -> list[str]:
    target = _field_model(model, loc)
    return sorted(target.model_fields) if target else []


def _describe(model: type[BaseModel], loc: list[str]) -> str:
    parent = _field_model(model, loc[:-1])
    if parent is None or loc[-1] not in parent.model_fields:
        return "see the comments in the shipped file"
    info = parent.model_fields[loc[-1]]
    default = "required" if info.is_required() else f"default {info.default!r}"
    return f"{default}; {info.description}" if info.description else default


def _check_catalogue(path: Path, catalogue: InstanceCatalogue) -> None:
    for name, row in catalogue.instance_types.items():
        if row.gpu not in catalogue.gpus:
            raise ConfigError(
                file=path,
                field=f"instance_types.{name}.gpu",
                value=row.gpu,
                problem="GPU model not described under [gpus]",
                fix=f"add a [gpus.{row.gpu}] table or use one of {', '.join(catalogue.gpus)}",
            )


def _check_packages(path: Path, packages: ModelPackages) -> None:
    for version, by_region in packages.versions.items():
        for region, arn in by_region.items():
            field = f'versions."{version}".{region}'
            match = MODEL_PACKAGE_ARN.match(arn)
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


def _check_environment(path: Path, name: str, env: EnvironmentConfig, catalogue: InstanceCatalogue) -> None:
    def fail(field: str, value: object, problem: str, fix: str) -> None:
        raise ConfigError(file=path, field=field, value=value, problem=problem, fix=fix)

    if env.account is None and name != DEFAULT_ENVIRONMENT:
        fail(
            "account",
            MISSING,
            f"only the default environment ({DEFAULT_ENVIRONMENT}) may leave the account out",
            'add `account = "<12-digit AWS account id>"`',
        )
    if not REGION.match(env.region):
        fail("region", env.region, "not an AWS Region name", 'write a Region such as "us-east-2"')
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
    zones = net.existing_vpc.availability_zones if net.existing_vpc else net.availability_zones
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
    for zone in zones:
        if not (zone.startswith(env.region) and len(zone) == len(env.region) + 1):
            fail(
                zones_field,
                zone,
                f"not an Availability Zone of {env.region}",
                f'use zones named like "{env.region}a"',
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

    if "sagemaker" in env.routes:
        _check_sagemaker(fail, env, catalogue)
    if "ecs" in env.routes:
        _check_ecs(fail, env, catalogue, zones)


def _check_sagemaker(fail: Any, env: EnvironmentConfig, catalogue: InstanceCatalogue) -> None:
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


ECS_GPU_FAMILIES = ("g6", "g6e")
SERVICES = ("api_server", "gpu_worker", "licence_proxy", "nats", "cloudwatch_agent")
FARGATE_SERVICES = ("api_server", "licence_proxy", "nats")
GPU_AGENT_CPU, GPU_AGENT_MEMORY_MIB = 128, 256  # the metrics daemon beside each worker (SonicMetrics)
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


def _check_fargate_size(fail: Any, field: str, cpu: int, memory_mib: int) -> None:
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


def _check_ecs(fail: Any, env: EnvironmentConfig, catalogue: InstanceCatalogue, zones: list[str]) -> None:
    ecs = env.ecs
    if ecs is None:
        fail(
            "ecs",
            MISSING,
            'routes include "ecs" but there is no [ecs] table',
            'add an [ecs] table (see config/environments/dev.toml) or remove "ecs" from routes',
        )
        return
    ec2_types = sorted(
        t for t in catalogue.instance_types if not t.startswith("ml.") and t.split(".")[0] in ECS_GPU_FAMILIES
    )
    if ecs.instance_type.split(".")[0] not in ECS_GPU_FAMILIES or ecs.instance_type not in ec2_types:
        fail(
            "ecs.instance_type",
            ecs.instance_type,
            f"not a GPU instance type of a family the ECS route supports ({', '.join(ECS_GPU_FAMILIES)})",
            f"use one of {', '.join(ec2_types)}, or describe it in config/{INSTANCE_TYPES_FILE}",
        )
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
    for service in SERVICES:
        if service not in ecs.services:
            fail(
                f"ecs.services.{service}",
                MISSING,
                "no image configured for this service",
                f"add an [ecs.services.{service}] table with source, tag and port (from Cartesia's bundle)",
            )
    for name, spec in ecs.services.items():
        if name in FARGATE_SERVICES:
            _check_fargate_size(fail, f"ecs.services.{name}", spec.cpu, spec.memory_mib)
    instance = catalogue.instance_types.get(ecs.instance_type)
    worker, agent = ecs.services.get("gpu_worker"), ecs.services.get("cloudwatch_agent")
    if instance and worker and agent:
        # ECS keeps some memory for the OS and agent; leave ~6% of the instance free.
        usable_mib = int(instance.memory_gib * 1024 * 0.94)
        if worker.memory_mib + GPU_AGENT_MEMORY_MIB > usable_mib:
            fail(
                "ecs.services.gpu_worker.memory_mib",
                worker.memory_mib,
                f"with the metrics agent ({GPU_AGENT_MEMORY_MIB} MiB) it does not fit a {ecs.instance_type} "
                f"({usable_mib} MiB usable)",
                f"set it to {usable_mib - GPU_AGENT_MEMORY_MIB} or less, or use a larger instance type",
            )
        if worker.cpu + GPU_AGENT_CPU > instance.vcpus * 1024:
            fail(
                "ecs.services.gpu_worker.cpu",
                worker.cpu,
                f"with the metrics agent ({GPU_AGENT_CPU} units) it exceeds a {ecs.instance_type}'s "
                f"{instance.vcpus * 1024} CPU units",
                f"set it to {instance.vcpus * 1024 - GPU_AGENT_CPU} or less",
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
    if ecs.secrets.create and ecs.copy_images:
        fail(
            "ecs.secrets.create",
            True,
            "the image copy would run before you can store the registry "
            "credentials in the secrets the stack creates",
            "create the secrets first and import them by name "
            "(create = false), or deploy once with copy_images = false, store the secrets, then enable it",
        )


def _model_package_arn(
    env_file: Path, packages_file: Path, env: EnvironmentConfig, packages: ModelPackages
) -> str | None:
    if "sagemaker" not in env.routes:
        return None
    by_region = packages.versions.get(env.sonic_version)
    if by_region is None:
        raise ConfigError(
            file=env_file,
            field="sonic_version",
            value=env.sonic_version,
            problem=f"no model packages listed for this version in {packages_file.name}",
            fix=f"use one of {', '.join(sorted(packages.versions))}, or add "
            f'[versions."{env.sonic_version}"] to {packages_file}',
        )
    arn = by_region.get(env.region)
    if arn is None:
        raise ConfigError(
            file=packages_file,
            field=f'versions."{env.sonic_version}".{env.region}',
            value=MISSING,
            problem=f"no model-package ARN for {env.sonic_version} in {env.region} (needed by {env_file})",
            fix=f'subscribe on AWS Marketplace, then add `{env.region} = "<ARN from SageMaker AI > Model '
            f'packages > My subscriptions>"`, or deploy to one of: {", ".join(sorted(by_region))}',
        )
    return arn
