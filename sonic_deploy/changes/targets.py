"""Which stack an environment and route mean: construct ID, CloudFormation stack name, Region, account."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sonic_deploy.config import (
    STACK_IDS,
    ConfigError,
    cloudformation_stack_name,
    environment_names,
    load_settings,
)

ROUTES_BY_STACK_ID: dict[str, str] = {stack_id: route for route, stack_id in STACK_IDS.items()}


class TargetError(Exception):
    """A wrong ENV or ROUTE on the command line; the message says what to write instead."""


@dataclass(frozen=True)
class StackTarget:
    """One deployable stack of one environment."""

    environment: str
    route: str
    region: str
    account: str | None

    @property
    def stack_id(self) -> str:
        return STACK_IDS[self.route]

    @property
    def stack_name(self) -> str:
        return cloudformation_stack_name(self.environment, self.route)


def environment_routes(config_dir: Path, environment: str) -> list[str]:
    """The routes an environment deploys, checked: raises TargetError for an unknown environment."""
    known = environment_names(config_dir)
    if not environment:
        raise TargetError(
            f"ENV is not set. Name an environment, e.g. `ENV={known[0] if known else 'dev'}` "
            f"(environments: {', '.join(known) or 'none yet'}; files config/environments/*.toml)"
        )
    if environment not in known:
        raise TargetError(
            f"ENV={environment} is not an environment: use one of {', '.join(known) or '(none yet)'} "
            f"(or create config/environments/{environment}.toml)"
        )
    try:
        settings = load_settings(config_dir, environment)
    except ConfigError as error:
        raise TargetError(str(error)) from None
    return list(settings.environment.routes)


def resolve_target(config_dir: Path, environment: str, route: str) -> StackTarget:
    """Check ENV and ROUTE together; the error names the values that would work."""
    routes = environment_routes(config_dir, environment)
    example = f"ENV={environment} ROUTE={routes[0]}"
    if not route:
        raise TargetError(
            f"ROUTE is not set. Environment {environment} deploys: {', '.join(routes)}; e.g. `{example}`"
        )
    if route not in STACK_IDS:
        raise TargetError(f"ROUTE={route} is not a route: use one of {', '.join(STACK_IDS)}")
    if route not in routes:
        raise TargetError(
            f"environment {environment} does not deploy the {route} route (its routes are "
            f"{', '.join(routes)}, from `routes` in config/environments/{environment}.toml): use "
            f'`{example}`, or add "{route}" to those routes'
        )
    settings = load_settings(config_dir, environment)
    return StackTarget(environment, route, settings.environment.region, settings.environment.account)
