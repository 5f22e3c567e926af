"""The route registry: each route's facts match its stack, and no code outside the routes and the config
compares a route's name (docs/architecture.md, "How to add a route")."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
from aws_cdk.assertions import Template

from sonic_deploy.config.schema import Route as RouteName
from sonic_deploy.routes import ROUTES
from sonic_deploy.routes.ecs import outputs as ecs_outputs
from sonic_deploy.routes.sagemaker import outputs as sagemaker_outputs

PACKAGE = Path(__file__).resolve().parents[2] / "sonic_deploy"
# A route's name compared in code: `route == "ecs"`, `"sagemaker" in routes`, `!= 'ecs'`, ...
COMPARISON = re.compile(
    rf"""(==|!=)\s*["']({"|".join(ROUTES)})["']|["']({"|".join(ROUTES)})["']\s+(not\s+)?in\b"""
)
# Where comparing is the point: a route's own folder, and the config modules that read `routes` (the
# loader, and the rules, limits, placeholders and network ranges it runs per route).
ALLOWED = (
    "routes/",
    "config/loader.py",
    "config/rules.py",
    "config/aws_limits.py",
    "config/placeholders.py",
    "config/network.py",
)


def _outputs(module: object) -> set[str]:
    return {value for name, value in vars(module).items() if name.isupper() and isinstance(value, str)}


def test_the_config_names_exactly_the_registered_routes() -> None:
    assert set(typing.get_args(RouteName)) == set(ROUTES)


@pytest.mark.parametrize(
    ("route", "module", "fixture"),
    [("ecs", ecs_outputs, "ecs_template"), ("sagemaker", sagemaker_outputs, "sagemaker_template")],
)
def test_every_output_a_route_declares_is_one_its_stack_writes(
    route: str, module: object, fixture: str, request: pytest.FixtureRequest
) -> None:
    template: Template = request.getfixturevalue(fixture)
    written = set(template.to_json()["Outputs"])
    declared = _outputs(module) - {getattr(module, "FALLBACK_PREFIX", "")}
    # The ECS licence proxy's output is written in air-gapped mode only (tests/licence cover it).
    optional = {ecs_outputs.LICENCE_PROXY_SERVICE} if route == "ecs" else set()
    assert declared - optional <= written
    assert set(ROUTES[route].connect_outputs) <= written | optional
    assert set(ROUTES[route].probe_outputs) <= written


def test_each_route_names_its_stack_class_and_id(ecs_stack: object, sagemaker_stack: object) -> None:
    for stack in (ecs_stack, sagemaker_stack):
        (route,) = [r for r in ROUTES.values() if r.stack_id == stack.node.id]  # type: ignore[attr-defined]
        assert isinstance(stack, route.stack_class())


def test_no_code_outside_the_routes_compares_a_route_name() -> None:
    comparing = set()
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(ALLOWED):
            continue
        if COMPARISON.search(path.read_text()):
            comparing.add(relative)
    assert comparing == set(), f"ask sonic_deploy.routes.ROUTES instead of comparing a name: {comparing}"
