"""The rules of the SageMaker route's `[sagemaker]` table that need more than one field or file."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from sonic_deploy.config.catalogue import INSTANCE_TYPES_FILE, InstanceCatalogue
from sonic_deploy.config.errors import ConfigError, Fail
from sonic_deploy.config.explain import toml_path
from sonic_deploy.config.placeholders import example_emails

if TYPE_CHECKING:
    from pathlib import Path

    from sonic_deploy.config.schema import EnvironmentConfig, ModelPackages


def check_sagemaker(fail: Fail, env: EnvironmentConfig, catalogue: InstanceCatalogue) -> None:
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


# What the config asks of every route (sonic_deploy/routes/route.py, RouteRules).


def check(
    fail: Fail, name: str, env: EnvironmentConfig, catalogue: InstanceCatalogue, zones: list[str]
) -> None:
    check_sagemaker(fail, env, catalogue)


def check_limits(fail: Fail, env: EnvironmentConfig) -> None:
    """Nothing of `[sagemaker]` meets an AWS limit the shared rules do not check."""


def public_subnets(env: EnvironmentConfig) -> bool:
    return False  # the endpoint's VPC has private subnets only


def alarm_emails(env: EnvironmentConfig) -> list[str] | None:
    return env.sagemaker.alarms.email


def placeholders(
    env_file: Path,
    packages_file: Path,
    env: EnvironmentConfig,
    packages: ModelPackages,
    model_package_arn: str | None,
) -> Iterator[ConfigError]:
    if model_package_arn is not None and model_package_arn in packages.unconfirmed:
        yield ConfigError(
            file=packages_file,
            field=toml_path(["versions", env.sonic_version, env.region]),
            value=model_package_arn,
            problem="an ARN seen in public samples, not confirmed against a subscription",
            fix="compare it with SageMaker AI > Model packages > My subscriptions in this Region, then "
            "remove it from `unconfirmed` (or write your own ARN)",
        )
    yield from example_emails(env_file, "sagemaker.alarms.email", env.sagemaker.alarms.email)
