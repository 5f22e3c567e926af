"""What a route is to the rest of sonic-deploy: its name, its stack, the wire its callers speak, the outputs
the tools read. The tools ask a route these things instead of comparing its name (docs/architecture.md,
"How to add a route"). No aws_cdk here: the stack class is imported only when the app asks for it."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Protocol, cast

if TYPE_CHECKING:
    from pathlib import Path
    from types import ModuleType

    from aws_cdk import Stack

    from sonic_deploy.config.cartesia import LicenceSettings, SecretsConfig
    from sonic_deploy.config.catalogue import InstanceCatalogue
    from sonic_deploy.config.errors import ConfigError, Fail
    from sonic_deploy.config.schema import EnvironmentConfig, ModelPackages


# One component of an ECR repository name (CreateRepository's repositoryName pattern, split at its slashes).
ECR_SEGMENT = re.compile(r"[a-z0-9]+(?:[._-][a-z0-9]+)*")


class Wire(Enum):
    """How a caller reaches the model."""

    CARTESIA = "cartesia"
    """Cartesia's own API (WebSocket and HTTP) behind the route's load balancer, with an API key."""
    SAGEMAKER = "sagemaker"
    """SageMaker's runtime (InvokeEndpointWithResponseStream), signed with the caller's AWS credentials."""


@dataclass(frozen=True)
class ClosedVariant:
    """A variant of an environment that the compliance gate (`make compliance`, sonic_deploy/compliance/
    variants.py) scans beside it, offered by the route whose table it switches, so that the gate compares no
    route's name: the environment's file with each pattern replaced, each matching exactly once."""

    slug: str
    """After the environment's name in the variant's: `dev-closed`, `dev-eks-air-gapped`."""
    title: str
    """What it switches on, as the gate's table heads its column: `air-gapped, TLS, FIS`."""
    switches: tuple[tuple[str, str], ...]
    """(regular expression, replacement) pairs; a replacement may name {environment} and {private_ca}."""


# The self-hosted routes' API listener in a closed variant: TLS from a Private CA, with deletion protection.
PRIVATE_CA_TLS = (
    'tls = true\ndomain_name = "sonic.{environment}.internal.example.com"\nprivate_ca_arn = "{private_ca}"\n'
    "deletion_protection = true"
)


class RouteRules(Protocol):
    """What the config asks of a route's rules module (`Route.rules`), so that no config module compares its
    name. Each function reads only the route's own table of `env`."""

    def check(
        self, fail: Fail, name: str, env: EnvironmentConfig, catalogue: InstanceCatalogue, zones: list[str]
    ) -> None:
        """The route's rules over its table, for environment `name` (the first problem raises)."""

    def check_limits(self, fail: Fail, env: EnvironmentConfig) -> None:
        """AWS's limits that its table's values meet, checked beside the shared ones."""

    def public_subnets(self, env: EnvironmentConfig) -> bool:
        """Its VPC has public subnets (NAT gateways), which its address range must hold."""

    def alarm_emails(self, env: EnvironmentConfig) -> list[str] | None:
        """Who receives its alarms (None: it has no alarms table)."""

    def licence(self, env: EnvironmentConfig) -> tuple[LicenceSettings, SecretsConfig] | None:
        """Its licence mode and secrets, for `licence upload` (None: it runs no licence proxy)."""

    def placeholders(
        self,
        env_file: Path,
        packages_file: Path,
        env: EnvironmentConfig,
        packages: ModelPackages,
        model_package_arn: str | None,
    ) -> Iterator[ConfigError]:
        """The shipped placeholders its stack would deploy, each as the error a deploy shows."""

    def closed_variants(self, env: EnvironmentConfig) -> list[ClosedVariant]:
        """What the compliance gate scans of `env` beside it as shipped: the settings a route's table leaves off
        that change its resources or actions (a licence mode, TLS, a way in), switched on."""


@dataclass(frozen=True)
class Route:
    name: str
    """As config's `routes` and every `--route` option spell it."""
    title: str
    """As a person reads it: "ECS", "SageMaker"."""
    stack_id: str
    """The stack's construct id: what `cdk deploy` selects and `cdk.out/<id>.template.json` is named."""
    stack: str
    """`module:Class` of its CDK stack."""
    wire: Wire
    connect_outputs: tuple[str, ...]
    """The stack outputs `connect` reads."""
    probe_outputs: tuple[str, ...]
    """The stack outputs the in-VPC probe reads besides the probe task's own."""
    preflight: str
    """Its preflight module: `checks(clients, settings, account)`, everything `sonic-deploy preflight` asks
    of AWS for it; `before_deploy(settings, secretsmanager)`, what a deploy would fail on minutes in; and
    `after_deploy(clients, settings)`, what only the deployed route shows (`--after-deploy`)."""
    rules: str
    """Its config rules module (`RouteRules`)."""
    network_half: int | None = None
    """Which half of `network.cidr` its VPC takes (0 the lower, 1 the upper). A route added after the first two
    takes none: its range comes from `network.route_cidrs`, so no deployed VPC moves."""
    runs_licence_proxy: bool = False
    """It runs Cartesia's licence proxy, which `licence upload` feeds (air-gapped)."""
    licence_reloads: bool = False
    """Its loader sends a new value of the licence secret to the running proxy by itself (EKS: the CSI
    driver refreshes the mounted file); without, `licence upload` restarts the proxy (ECS)."""
    ecr_segment: str | None = None
    """The folder its ECR repositories take under `sonic-<env>/` (EKS: `eks`), so that two self-hosted routes
    in one environment never make the same repository (docs/eks.md, section 10). The ECS route, the first,
    takes none: its repositories keep their names."""

    def __post_init__(self) -> None:
        if self.network_half not in (0, 1, None):
            raise ValueError(
                f"route {self.name}: network_half={self.network_half}: not 0, 1 or None (network.cidr has two "
                "halves; a route added later takes none and pins its range in network.route_cidrs)"
            )
        if self.ecr_segment is not None and not ECR_SEGMENT.fullmatch(self.ecr_segment):
            raise ValueError(
                f"route {self.name}: ecr_segment={self.ecr_segment!r}: not one component of an ECR repository "
                "name (lowercase letters and digits, single separators . _ - between them)"
            )

    def rules_module(self) -> RouteRules:
        return cast("RouteRules", importlib.import_module(self.rules))

    def preflight_module(self) -> ModuleType:
        return importlib.import_module(self.preflight)

    def stack_class(self) -> type[Stack]:
        """The CDK stack class (imports aws_cdk: the app's business, never an operator tool's)."""
        module, _, name = self.stack.partition(":")
        stack_class: type[Stack] = getattr(importlib.import_module(module), name)
        return stack_class
