"""Load config/ into one validated `Settings` object, or raise one `ConfigError` that says what to fix."""

from __future__ import annotations

import codecs
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from sonic_deploy.config.base import DEFAULT_ENVIRONMENT
from sonic_deploy.config.cartesia import (
    ApiConfig,
    Listener,
    SecretsConfig,
    ServiceConfig,
    listener,
    services_run,
)
from sonic_deploy.config.catalogue import (
    INSTANCE_TYPES_FILE,
    CatalogueStreams,
    InstanceCatalogue,
    InstanceType,
    catalogue_streams,
)
from sonic_deploy.config.errors import MISSING, ConfigError
from sonic_deploy.config.explain import explain, toml_path
from sonic_deploy.config.network import route_cidrs
from sonic_deploy.config.placeholders import find_placeholders
from sonic_deploy.config.rules import check_catalogue, check_environment, check_packages
from sonic_deploy.config.schema import EnvironmentConfig, ModelPackages
from sonic_deploy.routes import ROUTES

ENVIRONMENTS_DIR = "environments"
MODEL_PACKAGES_FILE = "model_packages.toml"


M = TypeVar("M", bound=BaseModel)


ENVIRONMENT_NAME = re.compile(r"[a-z][a-z0-9-]{0,19}")
STACK_IDS: dict[str, str] = {name: route.stack_id for name, route in ROUTES.items()}
"""Route -> its stack's construct ID: what `cdk deploy` selects and `cdk.out/<id>.template.json` is named."""


def cloudformation_stack_name(environment: str, route: str) -> str:
    """The CloudFormation stack name of one route's stack (deploy, diff and preflight all look it up)."""
    return f"sonic-{environment}-{route}"


@dataclass(frozen=True)
class InstancePool:
    """One SageMaker instance type of the endpoint: the streams and GPUs of one of its instances."""

    instance_type: str
    streams: int
    gpus: int


@dataclass(frozen=True)
class Settings:
    """Everything the app and the operator tools need for one deployment environment."""

    config_dir: Path
    environment_name: str
    environment: EnvironmentConfig
    model_package_arn: str | None
    catalogue: InstanceCatalogue
    placeholders: Mapping[str, tuple[ConfigError, ...]] = field(default_factory=dict)
    """Route -> shipped values still to replace (synth warns about them; deploy and preflight refuse them)."""

    @property
    def sagemaker_instance(self) -> InstanceType:
        return self.catalogue.instance_types[self.environment.sagemaker.instance_type]

    def catalogue_streams(self, instance_type: str) -> CatalogueStreams:
        """The catalogue's streams per instance of a type, for this environment's Sonic version."""
        return catalogue_streams(self.catalogue, self.environment.sonic_version, instance_type)

    @property
    def sagemaker_streams_per_instance(self) -> int:
        """What the SageMaker scaling targets: `sagemaker.streams_per_instance` if configured, else the
        catalogue's figure for the environment's Sonic version and SageMaker instance type."""
        configured = self.environment.sagemaker.streams_per_instance
        if configured is not None:
            return configured
        return self.catalogue_streams(self.environment.sagemaker.instance_type).streams

    @property
    def sagemaker_pools(self) -> tuple[InstancePool, ...]:
        """The endpoint's instance types by priority, `instance_type` then `capacity.fallback_types`: what one
        instance serves (the first's as `sagemaker_streams_per_instance`, the others' from the catalogue)."""
        sagemaker = self.environment.sagemaker
        streams = [self.sagemaker_streams_per_instance]
        streams += [self.catalogue_streams(t).streams for t in sagemaker.capacity.fallback_types]
        types = [sagemaker.instance_type, *sagemaker.capacity.fallback_types]
        return tuple(
            InstancePool(t, s, self.catalogue.instance_types[t].gpus)
            for t, s in zip(types, streams, strict=True)
        )

    @property
    def resource_prefix(self) -> str:
        return f"sonic-{self.environment_name}"

    @property
    def environment_file(self) -> Path:
        """The environment's TOML file, for errors that name it."""
        return self.config_dir / ENVIRONMENTS_DIR / f"{self.environment_name}.toml"

    def stack_name(self, route: str) -> str:
        return cloudformation_stack_name(self.environment_name, route)

    def ecr_repository(self, service: str, route: str) -> str:
        """The ECR repository `route`'s stack makes for one service's image (preflight looks there too):
        `sonic-<env>/<service>`, or `sonic-<env>/<segment>/<service>` for a route with an `ecr_segment`."""
        segment = ROUTES[route].ecr_segment
        folder = self.resource_prefix if segment is None else f"{self.resource_prefix}/{segment}"
        return f"{folder}/{service.replace('_', '-')}"

    def route_cidr(self, route: str) -> str:
        """The range of `route`'s VPC: network.route_cidrs if set, else its half of network.cidr (an existing
        VPC's range when one is named)."""
        net = self.environment.network
        if net.existing_vpc:
            return net.existing_vpc.vpc_cidr
        pinned = {str(name): cidr for name, cidr in net.route_cidrs.items()}
        return pinned.get(route) or route_cidrs(net.cidr)[route]

    @property
    def ecs_services(self) -> dict[str, ServiceConfig]:
        """The services whose images the ECS stack copies and runs: the licence loader in air-gapped mode only."""
        ecs = self.environment.ecs
        return services_run(ecs.services, ecs.licence_mode) if ecs is not None else {}

    @property
    def ecs_model_id(self) -> str:
        """The model_id the ECS route's agents send: `ecs.model_id`, else the environment's sonic_version."""
        ecs = self.environment.ecs
        return (ecs.model_id if ecs is not None else None) or self.environment.sonic_version

    @property
    def ecs_listener(self) -> Listener:
        """The ECS route's listener: `[ecs.api]` and `ecs.listener_port` in this environment."""
        ecs = self.environment.ecs
        api, port = (ecs.api, ecs.listener_port) if ecs is not None else (ApiConfig(), None)
        return listener("ecs", api, port, self.environment_name)

    @property
    def ecs_tls(self) -> bool:
        return self.ecs_listener.tls

    @property
    def ecs_plaintext_accepted_by(self) -> str | None:
        return self.ecs_listener.plaintext_accepted_by

    @property
    def ecs_listener_port(self) -> int:
        return self.ecs_listener.port

    @property
    def ecs_deletion_protection(self) -> bool:
        return self.ecs_listener.deletion_protection

    @property
    def canary_enabled(self) -> bool:
        """`canary.enabled`, else on outside the default environment (dev)."""
        configured = self.environment.canary.enabled
        return configured if configured is not None else self.environment_name != DEFAULT_ENVIRONMENT

    def licence_secret_name(self, secrets: SecretsConfig) -> str:
        """The secret that holds a route's offline licence in air-gapped mode (`sonic-deploy licence upload`
        makes it; the stack imports it by name): `secrets.licence`, else sonic/<env>/cartesia-licence."""
        return secrets.licence or f"sonic/{self.environment_name}/cartesia-licence"

    @property
    def endpoint_name(self) -> str:
        return self.environment.sagemaker.endpoint_name or self.resource_prefix


def require_config_dir(config_dir: Path) -> None:
    """Say plainly when a command is pointed at a folder that is not config/, not "unknown environment"."""
    if not (config_dir / ENVIRONMENTS_DIR).is_dir():
        raise ConfigError(
            file="command line",
            field="--config-dir",
            value=str(config_dir),
            problem="no environments/ folder there (not a sonic-deploy config/ folder)",
            fix="run from the repository root, or pass --config-dir PATH/TO/sonic-deploy/config",
        )


def environment_names(config_dir: Path) -> list[str]:
    return sorted(p.stem for p in (config_dir / ENVIRONMENTS_DIR).glob("*.toml"))


def load_settings(config_dir: Path, environment_name: str | None = None) -> Settings:
    """Read and check every file the chosen environment needs. Raises ConfigError, never anything deeper."""
    name = environment_name or DEFAULT_ENVIRONMENT
    if not ENVIRONMENT_NAME.fullmatch(name):
        raise ConfigError(
            file=config_dir / ENVIRONMENTS_DIR,
            field="env",
            value=name,
            problem="not a usable environment name (it names stacks, ECR repositories and the endpoint)",
            fix="use lower-case letters, digits and hyphens, starting with a letter, e.g. staging-eu",
        )
    env_file = config_dir / ENVIRONMENTS_DIR / f"{name}.toml"
    if not env_file.exists():
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

    check_catalogue(config_dir / INSTANCE_TYPES_FILE, catalogue)
    check_packages(config_dir / MODEL_PACKAGES_FILE, packages)
    check_environment(env_file, name, environment, catalogue)
    packages_file = config_dir / MODEL_PACKAGES_FILE
    arn = _model_package_arn(env_file, packages_file, environment, packages)
    placeholders = find_placeholders(env_file, packages_file, environment, packages, arn)
    return Settings(config_dir, name, environment, arn, catalogue, placeholders)


def read_toml(path: Path, missing_fix: str | None = None) -> dict[str, Any]:
    """A config file's tables, or a ConfigError naming what is wrong: missing, a folder (or anything else
    that is not a plain file) where the file should be, not UTF-8, nested too deeply, not TOML. The one
    reader of config/ (the loader's files and the planner's prices.toml)."""
    if path.is_dir():
        raise ConfigError(
            file=path,
            field="(file)",
            value=MISSING,
            problem="a folder, where a TOML file should be",
            fix=f"remove or rename the folder and put the file {path.name} there",
        )
    if path.exists() and not path.is_file():
        raise ConfigError(
            file=path,
            field="(file)",
            value=MISSING,
            problem="not a regular file (a pipe, socket or device?), where a TOML file should be",
            fix=f"replace it with the file {path.name}",
        )
    if not path.is_file():
        raise ConfigError(
            file=path,
            field="(file)",
            value=MISSING,
            problem="file not found",
            fix=missing_fix or f"restore {path.name} from the repository",
        )
    data = path.read_bytes()
    # TOML is UTF-8 without a byte-order mark; editors on Windows (Notepad's "UTF-8 with BOM") add one, and
    # tomllib then reports an invalid statement at line 1, column 1.
    if data.startswith(codecs.BOM_UTF8):
        raise ConfigError(
            file=path,
            field="(encoding)",
            value=data[:3],
            problem="starts with a UTF-8 byte-order mark (BOM), which the TOML reader refuses",
            fix='save the file as UTF-8 without a BOM (in some editors "UTF-8", not "UTF-8 with BOM")',
        )
    try:
        return tomllib.loads(data.decode())
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ConfigError(
            file=path,
            field="(encoding)",
            value=error.object[error.start : error.start + 4],
            problem=f"not UTF-8 text: the bytes at line {line} are not UTF-8 (TOML files are UTF-8)",
            fix="save the file as UTF-8, or retype the characters on that line",
        ) from None
    except RecursionError:
        raise ConfigError(
            file=path,
            field="(syntax)",
            value=MISSING,
            problem="arrays or inline tables nested too deeply to read",
            fix="nest at most a few levels: no config value needs more than a table of lists",
        ) from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(
            file=path,
            field="(syntax)",
            value=MISSING,
            problem=f"not valid TOML: {error}",
            fix="correct the syntax at that line (strings need quotes, tables [brackets])",
        ) from None


def _parse(path: Path, model: type[M]) -> M:
    data = read_toml(path)
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise explain(path, model, error) from None
    except RecursionError:
        raise ConfigError(
            file=path,
            field="(nesting)",
            value=MISSING,
            problem="tables or arrays nested too deeply to check",
            fix="nest at most a few levels: no config value needs more than a table of lists",
        ) from None


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
            field=toml_path(["versions", env.sonic_version, env.region]),
            value=MISSING,
            problem=f"no model-package ARN for {env.sonic_version} in {env.region} (needed by {env_file})",
            fix=f'subscribe on AWS Marketplace, then add `{env.region} = "<ARN from SageMaker AI > Model '
            f'packages > My subscriptions>"`, or deploy to one of: {", ".join(sorted(by_region))}',
        )
    return arn
