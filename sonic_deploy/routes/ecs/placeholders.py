"""The ECS route's shipped placeholders (sonic_deploy/config/placeholders.py says why a deploy refuses them):
its images' names and tags, the peers' address variables, example alarm addresses."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from sonic_deploy.config.errors import ConfigError
from sonic_deploy.config.placeholders import PLACEHOLDER_MARK, example_emails, image_placeholders
from sonic_deploy.routes.ecs.service_addresses import ADDRESS_FIELDS, SHOWN

if TYPE_CHECKING:
    from pathlib import Path

    from sonic_deploy.config.schema import EnvironmentConfig, ModelPackages


def placeholders(
    env_file: Path,
    packages_file: Path,
    env: EnvironmentConfig,
    packages: ModelPackages,
    model_package_arn: str | None,
) -> Iterator[ConfigError]:
    if env.ecs is None:
        return
    yield from image_placeholders(env_file, "ecs", env.ecs.services)
    for name, service in env.ecs.services.items():
        for field, (peer, _) in ADDRESS_FIELDS.items():
            variable = getattr(service, field)
            if variable is not None and PLACEHOLDER_MARK.lower() in variable.lower():
                yield ConfigError(
                    file=env_file,
                    field=f"ecs.services.{name}.{field}",
                    value=variable,
                    problem=f"still the shipped placeholder: the image would not be told where {SHOWN[peer]} is",
                    fix=f"write the variable {name} reads for {SHOWN[peer]}'s address, from Cartesia's deployment "
                    "bundle (docs/deploy.md, first deploy of the ECS route)",
                )
    yield from example_emails(env_file, "ecs.alarms.email", env.ecs.alarms.email)
