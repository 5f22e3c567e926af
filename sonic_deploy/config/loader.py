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
