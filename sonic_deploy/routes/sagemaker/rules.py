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

    from sonic_deploy.config.cartesia import LicenceSettings, SecretsConfig
    from sonic_deploy.config.schema import EnvironmentConfig, ModelPackages
    from sonic_deploy.routes.route import ClosedVariant


# A training plan's ARN (CreateEndpointConfig, MlReservationArn: arn:aws[a-z-]*:sagemaker:REGION:ACCOUNT:...).
_TRAINING_PLAN = re.compile(
    r"arn:aws[a-z-]*:sagemaker:([a-z0-9-]+):([0-9]{12}):training-plan/[A-Za-z0-9-]{1,64}"
)


def _check_types(fail: Fail, env: EnvironmentConfig, catalogue: InstanceCatalogue) -> None:
    """Each type is a catalogued ml. type the model package serves (when the catalogue says which)."""
    sm = env.sagemaker
    gpu_ml_types = sorted(t for t in catalogue.instance_types if t.startswith("ml."))
    supported = catalogue.model_package.get(env.sonic_version)
    fields = [("sagemaker.instance_type", sm.instance_type)]
    fields += [
        (f"sagemaker.capacity.fallback_types[{i}]", t) for i, t in enumerate(sm.capacity.fallback_types)
    ]
    for field, instance_type in fields:
        if instance_type not in gpu_ml_types:
            fail(
                field,
                instance_type,
                "not a GPU SageMaker (ml.) instance type",
                f"use one of {', '.join(gpu_ml_types)}, or describe it in config/{INSTANCE_TYPES_FILE}",
            )
        elif supported is not None and instance_type not in supported.instance_types:
            fail(
                field,
                instance_type,
                f"not a type the {env.sonic_version} model package serves ({supported.source})",
                f"use {' or '.join(supported.instance_types)}; or, once the package's own list has it "
                f'(`sonic-deploy preflight`), add it to [model_package."{env.sonic_version}"] in '
                f"config/{INSTANCE_TYPES_FILE}",
            )
    if len({catalogue.instance_types[t].local_storage for _, t in fields}) > 1:
        fail(
            "sagemaker.capacity.fallback_types",
            sm.capacity.fallback_types,
            "mixes types with local NVMe storage and types without: the endpoint config has one volume key, "
            "which SageMaker refuses for the former and the latter need (config/instance_types.toml)",
            "fall back only to types whose local_storage is the same as instance_type's",
        )
    if sm.capacity.fallback_types and supported is None:
        fail(
            "sagemaker.capacity.fallback_types",
            sm.capacity.fallback_types,
            f"config/{INSTANCE_TYPES_FILE} names no types the {env.sonic_version} model package serves",
            f'add [model_package."{env.sonic_version}"] with the listing\'s instance_types and source',
        )


def _check_capacity(fail: Fail, env: EnvironmentConfig) -> None:
    sm, capacity = env.sagemaker, env.sagemaker.capacity
    types = [sm.instance_type, *capacity.fallback_types]
    repeated = sorted({t for t in types if types.count(t) > 1})
    if repeated:
        fail(
            "sagemaker.capacity.fallback_types",
            capacity.fallback_types,
            f"names {', '.join(repeated)} twice (instance_type is the first pool)",
            "list each type once, after instance_type",
        )
    arn = capacity.ml_reservation_arn
    if arn is None:
        return
    match = _TRAINING_PLAN.fullmatch(arn)
    if match is None:
        fail(
            "sagemaker.capacity.ml_reservation_arn",
            arn,
            "not a training plan's ARN",
            f"use arn:aws:sagemaker:{env.region}:<account>:training-plan/<name> (aws sagemaker list-training-plans)",
        )
    elif match.group(1) != env.region:
        fail(
            "sagemaker.capacity.ml_reservation_arn",
            arn,
            f"a plan of {match.group(1)}: the endpoint is in {env.region}",
            f"name a training plan of {env.region}",
        )
    if capacity.fallback_types:
        # SageMaker Developer Guide, "Deploy an inference endpoint using the API": the variant's InstanceType
        # "must match the InstanceType of your training plan"; instance pools replace InstanceType.
        fail(
            "sagemaker.capacity.ml_reservation_arn",
            arn,
            "a reservation with fallback_types: the variant's instance type must match the plan's, and "
            "instance pools have none (docs/capacity.md, SageMaker)",
            "keep the reservation or the fallback types, not both",
        )


def check_sagemaker(fail: Fail, env: EnvironmentConfig, catalogue: InstanceCatalogue) -> None:
    sm = env.sagemaker
    _check_types(fail, env, catalogue)
    _check_capacity(fail, env)
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


def licence(env: EnvironmentConfig) -> tuple[LicenceSettings, SecretsConfig] | None:
    return None  # no licence proxy: the model package's licence is the Marketplace subscription


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


def closed_variants(env: EnvironmentConfig) -> list[ClosedVariant]:
    return []  # isolated as shipped: private subnets only, the model network-isolated
