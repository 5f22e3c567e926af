"""The rules of Cartesia's self-hosted services, shared by the routes that run them (ECS, EKS): secrets, images
and ports, plain variables that look like secrets, worker counts, the GPU type. Each takes the route's table
name, so its errors name the field the user wrote."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sonic_deploy.config.cartesia import LicenceSettings, SecretsConfig, ServiceConfig
from sonic_deploy.config.catalogue import INSTANCE_TYPES_FILE, InstanceCatalogue
from sonic_deploy.config.errors import MISSING, Fail
from sonic_deploy.config.explain import toml_path

# Secrets Manager names (CreateSecret, Name): 1 to 512 ASCII letters, digits and /_+=.@- . (Its advice not
# to end a name in a hyphen and six characters is about lookups by partial ARN, which the stacks do not make:
# a name such as prod/db-secret is left alone.)
SECRET_NAME = re.compile(r"[A-Za-z0-9/_+=.@-]{1,512}")


def check_secret_name(fail: Fail, field: str, name: str) -> None:
    if not SECRET_NAME.fullmatch(name):
        fail(
            field,
            name,
            "not a Secrets Manager secret name (1 to 512 ASCII letters, digits and / _ + = . @ -)",
            'write the secret\'s name, not its ARN, e.g. "sonic/prod/cartesia-api-key"',
        )


CREATED_SECRET_PREFIX = "sonic/"


def check_secret_names(fail: Fail, table: str, secrets: SecretsConfig) -> None:
    """The names in `[<route>.secrets]`."""
    check_secret_name(fail, f"{table}.secrets.api_key", secrets.api_key)
    check_secret_name(fail, f"{table}.secrets.registry_credentials", secrets.registry_credentials)
    if secrets.licence is not None:
        check_secret_name(fail, f"{table}.secrets.licence", secrets.licence)


def check_created_secrets(fail: Fail, table: str, secrets: SecretsConfig, copy_images: bool) -> None:
    """What the stack may create (`[<route>.secrets] create`)."""
    if secrets.create and copy_images:
        fail(
            f"{table}.secrets.create",
            True,
            "the image copy would run before you can store the registry "
            "credentials in the secrets the stack creates",
            "create the secrets yourself first and import them by name (create = false), or keep "
            'copy_images = false and copy the images by hand (docs/routes.md, "Copy the images")',
        )
    # The bootstrap policy lets CloudFormation create and delete secrets under sonic/ only (docs/deploy.md).
    for field in ("api_key", "registry_credentials") if secrets.create else ():
        name = getattr(secrets, field)
        if not name.startswith(CREATED_SECRET_PREFIX):
            fail(
                f"{table}.secrets.{field}",
                name,
                f"the stack creates this secret (create = true), and `make bootstrap`'s execution policy lets "
                f"CloudFormation manage only secrets whose names start with {CREATED_SECRET_PREFIX}",
                f'name it "{CREATED_SECRET_PREFIX}<env>/...", or create it yourself and set create = false',
            )


def check_services(
    fail: Fail,
    table: str,
    services: Mapping[Any, ServiceConfig],
    required: Sequence[str],
    stored: str,
    each: Callable[[str, ServiceConfig], None] | None = None,
) -> None:
    """Each required service has an image, each serving one its port, no secret in a plain variable; `each`,
    the route's own check of a service, between the two (the order its errors come in)."""
    for service in required:
        if service not in services:
            fail(
                f"{table}.services.{service}",
                MISSING,
                "no image configured for this service",
                f"add an [{table}.services.{service}] table with source, tag and port (from Cartesia's bundle)",
            )
    for name, spec in services.items():
        if name not in ("cloudwatch_agent", "licence_loader") and spec.port is None:
            fail(
                f"{table}.services.{name}.port",
                MISSING,
                "this service needs the port it serves on",
                f"add `port = ...` to [{table}.services.{name}] (from Cartesia's bundle)",
            )
        if each is not None:
            each(name, spec)
        check_plain_environment(fail, table, name, spec.environment, spec.not_secrets, stored)


def check_workers(fail: Fail, table: str, min_workers: int, max_workers: int) -> None:
    if min_workers < 2:
        fail(
            f"{table}.min_workers",
            min_workers,
            "fewer than 2 GPU workers (one failure would stop all speech)",
            f"set {table}.min_workers to 2 or more",
        )
    if min_workers > max_workers:
        fail(
            f"{table}.max_workers",
            max_workers,
            f"below min_workers ({min_workers})",
            f"set {table}.max_workers to {min_workers} or more",
        )


def check_idle_timeout(fail: Fail, table: str, idle_timeout_s: int, deregistration_delay_s: int) -> None:
    if idle_timeout_s < deregistration_delay_s:
        fail(
            f"{table}.nlb_idle_timeout_s",
            idle_timeout_s,
            f"shorter than deregistration_delay_s ({deregistration_delay_s}): a call that pauses between "
            "utterances while its API server drains would be cut by the idle timeout first",
            f'set it to {deregistration_delay_s} or more (docs/operate.md, "What a deploy does to a live call")',
        )


# The GPU families the self-hosted routes run Cartesia's worker on (one GPU each: G6 L4, G6e L40S, G7e).
GPU_FAMILIES = ("g6", "g6e", "g7e")


def check_gpu_type(
    fail: Fail, field: str, instance_type: str, catalogue: InstanceCatalogue, route_title: str
) -> None:
    """A GPU type of a family the route supports, described in the catalogue, with one GPU (one worker per
    instance, and a worker uses one GPU)."""
    ec2_types = sorted(
        t
        for t, row in catalogue.instance_types.items()
        if not t.startswith("ml.") and t.split(".")[0] in GPU_FAMILIES and row.gpus == 1
    )
    if instance_type.split(".")[0] not in GPU_FAMILIES or instance_type not in ec2_types:
        fail(
            field,
            instance_type,
            f"not a one-GPU instance type of a family the {route_title} route supports ({', '.join(GPU_FAMILIES)})",
            f"use one of {', '.join(ec2_types)}, or describe it in config/{INSTANCE_TYPES_FILE}",
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


def check_plain_environment(
    fail: Fail, table: str, service: str, environment: dict[str, str], not_secrets: list[str], stored: str
) -> None:
    """Plain variables are written where anyone who may describe `stored` reads them (ECS: the task definition,
    and cdk-nag's AwsSolutions-ECS2 is acknowledged only because this check holds; EKS: the Deployment)."""
    for variable in not_secrets:
        if variable not in environment:
            fail(
                f"{table}.services.{service}.not_secrets",
                variable,
                "not a variable of this service's environment",
                f"remove it from not_secrets, or add it to environment in [{table}.services.{service}]",
            )
    for variable in environment:
        part = secret_name_part(variable)
        if part is not None and variable not in not_secrets:
            fail(
                toml_path([table, "services", service, "environment", variable]),
                _NotShown(),
                f"named like a secret ({part}), but a plain variable is stored in the {stored}, readable "
                "by anyone who may describe it",
                f'keep the value in Secrets Manager and write secrets = {{ {variable} = "<name in [{table}.secrets]>" }} '
                f'in [{table}.services.{service}] instead; or, if it holds no secret, not_secrets = ["{variable}"]',
            )


CONTAINER_PATH = re.compile(r"/(?:[A-Za-z0-9._@+=-]+/?)*")


def check_licence_path(fail: Fail, table: str, licence: LicenceSettings) -> None:
    path = licence.licence_data_path
    if not CONTAINER_PATH.fullmatch(path) or ".." in path.split("/") or len(path) > 4096 or path == "/":
        fail(
            f"{table}.licence_data_path",
            path,
            "not an absolute path inside the container below / (starts with /; letters, digits and . _ - @ + = ; "
            "no ..)",
            'write one such as "/data"',
        )


def check_licence_mode(
    fail: Fail, table: str, licence: LicenceSettings, services: Mapping[Any, ServiceConfig]
) -> None:
    """Air-gapped: a loader image and no NAT gateway; connected: a NAT gateway."""
    if licence.licence_mode == "air-gapped" and "licence_loader" not in services:
        fail(
            f"{table}.services.licence_loader",
            MISSING,
            "air-gapped mode loads the licence into the proxy with a small shell image, and none is configured",
            f'[{table}.services.licence_loader] source = "public.ecr.aws/docker/library/busybox", tag = "1.37", '
            "private_registry = false (a BusyBox image: sh, base64, wget, timeout, cmp, cp and touch)",
        )
    if licence.licence_mode == "air-gapped" and licence.nat_gateways > 0:
        fail(
            f"{table}.nat_gateways",
            licence.nat_gateways,
            "air-gapped mode must have no egress, but a NAT gateway gives the containers a way out",
            f'set {table}.nat_gateways = 0, or licence_mode = "connected"',
        )
    if licence.licence_mode == "connected" and licence.nat_gateways == 0:
        fail(
            f"{table}.nat_gateways",
            0,
            "connected mode needs HTTPS egress for licensing and model artifacts",
            f'set {table}.nat_gateways = 1, or licence_mode = "air-gapped"',
        )
