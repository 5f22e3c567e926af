"""Values shipped in config/ to be replaced before a real deploy: image names and tags, an ARN nobody has
confirmed, a documentation account, example e-mail addresses.

They must not stop `make synth` on the default config (a newcomer synthesizes before owning any of these),
so synth only warns. A first create with them fails in AWS after minutes, and may leave retained resources
behind; `make deploy`, the deploy workflow and `sonic-deploy preflight` therefore refuse them before any
AWS call, with the file, the field and the fix.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from sonic_deploy.config.cartesia import ServiceConfig, ServiceName
from sonic_deploy.config.errors import ConfigError
from sonic_deploy.config.schema import EnvironmentConfig, ModelPackages
from sonic_deploy.routes import ROUTES

PLACEHOLDER_MARK = "REPLACE-ME"
# AWS's own documentation account; a deploy with it fails with the wrong credentials, or not at all.
DOCUMENTATION_ACCOUNT = "123456789012"
# RFC 2606 reserves these domains for examples: no one reads an alarm sent there.
EXAMPLE_DOMAINS = ("example.com", "example.org", "example.net")


def find_placeholders(
    env_file: Path,
    packages_file: Path,
    env: EnvironmentConfig,
    packages: ModelPackages,
    model_package_arn: str | None,
) -> dict[str, tuple[ConfigError, ...]]:
    """Route -> the placeholders its stack would deploy, each as the error a deploy shows."""
    return {
        route: tuple(_placeholders(route, env_file, packages_file, env, packages, model_package_arn))
        for route in env.routes
    }


def _placeholders(
    route: str,
    env_file: Path,
    packages_file: Path,
    env: EnvironmentConfig,
    packages: ModelPackages,
    model_package_arn: str | None,
) -> Iterator[ConfigError]:
    if env.account == DOCUMENTATION_ACCOUNT:
        yield ConfigError(
            file=env_file,
            field="account",
            value=env.account,
            problem="AWS's documentation example account, not yours",
            fix="write your 12-digit account id (`aws sts get-caller-identity --query Account`)",
        )
    yield from (
        ROUTES[route].rules_module().placeholders(env_file, packages_file, env, packages, model_package_arn)
    )


def example_emails(env_file: Path, field: str, addresses: list[str]) -> Iterator[ConfigError]:
    for address in addresses:
        domain = address.rsplit("@", 1)[-1].lower()
        if any(domain == d or domain.endswith(f".{d}") for d in EXAMPLE_DOMAINS):
            yield ConfigError(
                file=env_file,
                field=field,
                value=address,
                problem="an example address: nobody would receive the alarms",
                fix="write the on-call address (a list that reaches a person)",
            )


def refusal_lines(
    settings_name: str, placeholders: Mapping[str, tuple[ConfigError, ...]], routes: Iterable[str]
) -> list[str]:
    """What a deploy or preflight says instead of going on, a line each (each placeholder's error is one
    line whatever the file holds); none when `routes` have no placeholder."""
    found = [str(p) for route in routes for p in placeholders.get(route, ())]
    if not found:
        return []
    return [
        f"environment {settings_name} still has {len(found)} placeholder(s) to replace before a deploy:",
        *found,
    ]


def refusal(
    settings_name: str, placeholders: Mapping[str, tuple[ConfigError, ...]], routes: Iterable[str]
) -> str | None:
    """The refusal's lines as one text (the entries indented under the first), or None."""
    lines = refusal_lines(settings_name, placeholders, routes)
    return "\n  ".join(lines) if lines else None


def image_placeholders(
    env_file: Path, table: str, services: Mapping[ServiceName, ServiceConfig]
) -> Iterator[ConfigError]:
    """The shipped image names and tags still in `[<table>.services.*]` (the self-hosted routes')."""
    for name, service in services.items():
        for field in ("source", "tag"):
            value = getattr(service, field)
            if PLACEHOLDER_MARK.lower() in value.lower():
                yield ConfigError(
                    file=env_file,
                    field=f"{table}.services.{name}.{field}",
                    value=value,
                    problem="still the shipped placeholder",
                    fix=f"write the image {field} from Cartesia's deployment bundle",
                )


# The variables a service's image reads its peers' addresses from, and how an error names each peer.
ADDRESS_VARIABLES = {"nats_url_variable": "nats", "licence_proxy_url_variable": "licence_proxy"}
SHOWN = {"nats": "NATS", "licence_proxy": "the licence proxy"}


def address_placeholders(
    env_file: Path, table: str, services: Mapping[Any, ServiceConfig], guide: str
) -> Iterator[ConfigError]:
    """Each peer-address variable still the shipped placeholder: the image would not find its peer."""
    for name, service in services.items():
        for field, peer in ADDRESS_VARIABLES.items():
            variable = getattr(service, field)
            if variable is not None and PLACEHOLDER_MARK.lower() in variable.lower():
                yield ConfigError(
                    file=env_file,
                    field=f"{table}.services.{name}.{field}",
                    value=variable,
                    problem=f"still the shipped placeholder: the image would not be told where {SHOWN[peer]} is",
                    fix=f"write the variable {name} reads for {SHOWN[peer]}'s address, from Cartesia's deployment "
                    f"bundle ({guide})",
                )
