"""What both routes' stacks share (`common.py`, `boundary.py`); `add_stacks` is what app.py and the tests
call. Each route's stack is its package's (`sonic_deploy/routes/<route>/stack.py`)."""

from __future__ import annotations

from collections.abc import Callable

from aws_cdk import Annotations, App, Environment, Stack, Tags

from sonic_deploy.config import Settings
from sonic_deploy.routes import ROUTES
from sonic_deploy.stacks.boundary import apply_permissions_boundary


def add_stacks(app: App, settings: Settings, *, default_account: str | None = None) -> dict[str, Stack]:
    """One stack per route the environment deploys. `default_account` is the CLI's account, used only
    when the environment does not name one."""
    env = settings.environment
    where = Environment(account=env.account or default_account, region=env.region)
    stacks: dict[str, Stack] = {}
    for route in env.routes:
        description = f"sonic-deploy {settings.environment_name}: Cartesia Sonic, {route} route"
        # Imported here, by the registry: the route stacks import stacks.common, so either may come first.
        stack_class: Callable[..., Stack] = ROUTES[route].stack_class()
        stacks[route] = stack_class(
            app,
            ROUTES[route].stack_id,
            settings=settings,
            env=where,
            stack_name=settings.stack_name(route),
            description=description,
        )
    for stack_route, stack in stacks.items():
        apply_permissions_boundary(stack)
        for key, value in env.tags.items():
            Tags.of(stack).add(key, value)
        # Synth goes on (the default config must synthesize); `make deploy` and preflight refuse these.
        for placeholder in settings.placeholders.get(stack_route, ()):
            Annotations.of(stack).add_warning_v2(
                f"sonic-deploy:placeholder:{placeholder.field}", f"placeholder: {placeholder}"
            )
    return stacks
