"""Cartesia's self-hosted services as config: the images and container settings of `[<route>.services.*]`, the
secrets and the API's load balancer (`[<route>.api]`), shared by the routes that run them (ECS, EKS). Image
names, tags and most settings are Cartesia's and come from your deployment bundle."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from sonic_deploy.config.base import DEFAULT_ENVIRONMENT, Email, Strict

# The OCI distribution reference grammar (github.com/distribution/reference, reference.go), which ECR and
# every registry apply: tag := /[\w][\w.-]{0,127}/ (ASCII \w here: pydantic's \w would take any letter).
ImageTag = Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")]
# name := [domain '/'] remote-name, domain := host [':' port-number], domain-component :=
# /([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])/, path-component := alpha-numeric [separator
# alpha-numeric]*, alpha-numeric := /[a-z0-9]+/, separator := /[_.]|__|[-]*/; a name is at most 255 characters.
# Which of the two the first component is, the grammar alone leaves open; distribution's normalisation
# (normalize.go, splitDockerDomain) decides: a registry host only if it holds a '.' or a ':' or is
# `localhost`, otherwise it is the first path component (Docker Hub's namespace) and must be lower case.
# So "Myregistry/api-server" is refused, "myregistry/api-server" taken. An IPv6 registry ("[::1]:5000/x",
# allowed by newer versions of the grammar) stays refused: no registry Cartesia's bundle names is one.
_DOMAIN_COMPONENT = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_PORT = r"(?::[0-9]+)"
_DOMAIN = (
    rf"(?:localhost{_PORT}?|{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})+{_PORT}?|{_DOMAIN_COMPONENT}{_PORT})"
)
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[_.]|__|-+)[a-z0-9]+)*"
IMAGE_NAME = re.compile(rf"(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*")


def _image_name(value: str) -> str:
    if len(value) > 255 or IMAGE_NAME.fullmatch(value) is None:
        raise PydanticCustomError(
            "image_name",
            "not an image name a registry takes (registry host, with a . or : in it or localhost, then "
            "lower-case path parts separated by /; "
            "no tag, digest, space or upper case after the host; at most 255 characters)",
        )
    return value


ImageName = Annotated[str, AfterValidator(_image_name)]


def _manifest_digest(value: str) -> str:
    # fullmatch, not a `$`-anchored pattern: `$` also matches before a trailing newline.
    if re.fullmatch(r"sha256:[0-9a-f]{64}", value) is None:
        raise PydanticCustomError(
            "image_digest", "not an image manifest digest (sha256: and 64 lowercase hex digits)"
        )
    return value


ImageDigest = Annotated[str, AfterValidator(_manifest_digest)]


ServiceName = Literal[
    "api_server", "gpu_worker", "licence_proxy", "nats", "cloudwatch_agent", "licence_loader"
]
# An environment variable's name, or the shipped placeholder in front of one (REPLACE-ME_NATS_URL).
AddressVariable = Annotated[str, Field(pattern=r"^(?:REPLACE-ME_)?[A-Za-z_][A-Za-z0-9_]{0,254}$")]
SecretRef = Literal["api_key", "registry_credentials"]


class ServiceConfig(Strict):
    """One container of the self-hosted product. Image names, tags and most settings are Cartesia's and
    are not public: they come from your deployment bundle, into config, never into code."""

    _multiline: ClassVar[frozenset[str]] = frozenset({"command", "health_check", "environment"})

    source: ImageName = Field(description="image to copy from, without tag, e.g. <registry>/<path>/<name>")
    tag: ImageTag = Field(description="the tag it gets in your ECR (and the source's, without a digest)")
    digest: ImageDigest | None = Field(
        default=None,
        description="pin the image: 'sha256:<64 hex>' of its linux/amd64 manifest (not of a multi-arch index); "
        "the copy pulls source@digest and tasks run exactly this digest",
    )
    port: Annotated[int, Field(ge=1, le=65535)] | None = Field(
        default=None, description="the port it serves on (every service but cloudwatch_agent)"
    )
    # The largest GPU instance the ECS route could use (g6e.48xlarge: 192 vCPUs, 1,536 GiB).
    cpu: Annotated[int, Field(ge=128, le=196_608)] = 1024
    memory_mib: Annotated[int, Field(ge=256, le=1_572_864)] = 2048
    environment: dict[str, str] = Field(
        default={},
        description="plain settings, stored in the task definition (ECS) or Deployment (EKS); a name with a "
        "secret-like part (KEY, TOKEN, "
        "SECRET, PASSWORD, AUTH, ...) is refused: put those in `secrets`, or list it in `not_secrets`",
    )
    not_secrets: list[str] = Field(
        default=[],
        description="names in `environment` with a secret-like part that you have checked hold no secret (e.g. "
        "AUTH_ENABLED): kept as plain variables (on ECS, named in the task definition's acknowledgement)",
    )
    secrets: dict[str, SecretRef] = Field(
        default={}, description="environment variable -> which secret (api_key or registry_credentials)"
    )
    command: list[str] = []
    metrics_port: Annotated[int, Field(ge=1, le=65535)] | None = Field(
        default=None, description="port of a Prometheus /metrics endpoint to scrape into CloudWatch"
    )
    health_check: list[str] = Field(
        default=[], description='container health check, e.g. ["CMD-SHELL", "curl -sf localhost:5000/status"]'
    )
    private_registry: bool = Field(
        default=True, description="pull with the registry credentials (false for public images)"
    )
    # The names are Cartesia's (not public); the values are the route's in-cluster addresses.
    nats_url_variable: AddressVariable | None = Field(
        default=None,
        description="api_server and gpu_worker: the variable the image reads NATS's address from; the stack "
        "sets it to NATS's address (ECS: nats://nats.sonic.internal:<nats port>; EKS: "
        "nats://nats.<namespace>.svc.cluster.local:<nats port>)",
    )
    licence_proxy_url_variable: AddressVariable | None = Field(
        default=None,
        description="api_server and gpu_worker: the variable the image reads the licence proxy's address from; "
        "the stack sets it to the proxy's in-VPC address (ECS: http://licence-proxy.sonic.internal:<port>; EKS: the "
        "licence-proxy Service's cluster name)",
    )


class SecretsConfig(Strict):
    api_key: str = Field(description="Secrets Manager name of the Cartesia API key")
    registry_credentials: str = Field(
        description='Secrets Manager name of {"username": "_json_key", "password": "<service-account JSON>"}'
    )
    create: bool = Field(
        default=False, description="create both secrets (placeholder values) instead of importing"
    )
    licence: str | None = Field(
        default=None,
        description="air-gapped mode: the secret with the offline licence (default sonic/<env>/cartesia-licence); "
        "`sonic-deploy licence upload` creates and writes it, before the first deploy",
    )


class WorkerAlarmConfig(Strict):
    """`[<route>.alarms]` of a route that runs the GPU workers itself: who is told, the workers' TTFA p95, how
    long load may sit at capacity. Each route adds how it sees a worker waiting for capacity."""

    email: list[Email] = []
    worker_ttfa_p95_ms: Annotated[float, Field(gt=0, le=60_000)] = 200.0
    capacity_minutes: Annotated[int, Field(ge=1, le=1440)] = Field(
        default=5, description="worker load above worker capacity for this long: capacity exhausted"
    )


class LicenceSettings(Strict):
    """The licence modes of the self-hosted routes' tables (`[ecs]`, `[eks]`): connected (the licence proxy
    calls Cartesia through a NAT gateway) or air-gapped (no egress, an offline licence the proxy keeps on
    storage of its own; docs/routes.md, "Air-gapped mode")."""

    licence_mode: Literal["connected", "air-gapped"] = "connected"
    nat_gateways: Annotated[int, Field(ge=0, le=1)] = 1
    licence_data_path: str = Field(
        default="/data", description="where the licence proxy keeps its offline licence (air-gapped mode)"
    )
    licence_content_type: str = Field(
        default="application/octet-stream",
        pattern=r"^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+$",
        description="Content-Type of the licence upload (POST /license) in air-gapped mode",
    )


def services_run(services: Mapping[Any, ServiceConfig], licence_mode: str) -> dict[str, ServiceConfig]:
    """The services a self-hosted route copies and runs: the licence loader in air-gapped mode only."""
    return {
        name: spec
        for name, spec in services.items()
        if name != "licence_loader" or licence_mode == "air-gapped"
    }


class ApiConfig(Strict):
    """`[ecs.api]`, `[eks.api]`: the internal load balancer in front of the API server. TLS terminates there (TCP to the
    API server behind it); outside the default environment it is on, and `tls = false` there is refused
    unless `allow_plaintext_outside_dev = true` accepts plain text on purpose."""

    tls: bool | None = Field(
        default=None,
        description="a TLS listener (wss://, https://) instead of plain TCP (ws://); default: on outside dev, "
        "off in dev. On, it needs domain_name and one certificate source: certificate_arn or private_ca_arn. "
        "Off outside dev only with allow_plaintext_outside_dev = true",
    )
    allow_plaintext_outside_dev: bool = Field(
        default=False,
        description="outside dev, accept tls = false: the API key, transcripts and audio cross the VPC in "
        "clear (ws://). Refused in dev (plain by default) and with TLS on (it would accept nothing)",
    )
    certificate_arn: str | None = Field(
        default=None,
        description="an ACM certificate (imported or issued) in the environment's Region that names domain_name",
    )
    private_ca_arn: str | None = Field(
        default=None,
        description="an AWS Private CA in the environment's Region: the stack has ACM issue domain_name's "
        "certificate from it (acm.PrivateCertificate), and renews it",
    )
    domain_name: str | None = Field(
        default=None,
        description="the name agents dial (the certificate names it; point it at the stack output "
        "LoadBalancerDnsName with a private DNS record): the host of ApiUrl when TLS is on",
    )
    deletion_protection: bool | None = Field(
        default=None, description="the load balancer refuses deletion; default: on outside dev, off in dev"
    )
    access_logs: bool = Field(
        default=True,
        description="NLB access logs to an S3 bucket the stack makes (ELB writes them for TLS listeners only)",
    )
    access_log_retention_days: Annotated[int, Field(ge=1, le=3650)] = Field(
        default=365, description="days an access log is kept before S3 lifecycle deletes it"
    )


@dataclass(frozen=True)
class Listener:
    """What a route's `[<route>.api]` and listener port come to in one environment."""

    tls: bool
    port: int
    deletion_protection: bool
    plaintext_accepted_by: str | None
    """With a plain listener, the setting that accepted it (the acknowledgement's reason); else None."""


def listener(table: str, api: ApiConfig, port: int | None, environment_name: str) -> Listener:
    """TLS and deletion protection on outside the default environment unless set; the port 443 with TLS, 80
    without, unless set."""
    default = environment_name != DEFAULT_ENVIRONMENT
    tls = api.tls if api.tls is not None else default
    accepted_by = None
    if not tls and environment_name == DEFAULT_ENVIRONMENT:
        accepted_by = f"{DEFAULT_ENVIRONMENT}, whose listener is plain unless {table}.api.tls = true"
    elif not tls and api.allow_plaintext_outside_dev:
        accepted_by = f"{table}.api.allow_plaintext_outside_dev = true in {environment_name}"
    return Listener(
        tls=tls,
        port=port if port is not None else 443 if tls else 80,
        deletion_protection=api.deletion_protection if api.deletion_protection is not None else default,
        plaintext_accepted_by=accepted_by,
    )
