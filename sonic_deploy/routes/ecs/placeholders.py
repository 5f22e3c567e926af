"""The ECS route's shipped placeholders (sonic_deploy/config/placeholders.py says why a deploy refuses them):
its images' names and tags, the peers' address variables, example alarm addresses."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from sonic_deploy.config.errors import ConfigError
from sonic_deploy.config.placeholders import address_placeholders, example_emails, image_placeholders

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
    yield from address_placeholders(
        env_file, "ecs", env.ecs.services, "docs/deploy.md, first deploy of the ECS route"
    )
    yield from example_emails(env_file, "ecs.alarms.email", env.ecs.alarms.email)
