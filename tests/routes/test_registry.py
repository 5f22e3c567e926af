"""The route registry: each route's facts match its stack, and no code outside the routes and the config
compares a route's name (docs/architecture.md, "How to add a route")."""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NoReturn

import pytest
from aws_cdk.assertions import Template

from sonic_deploy.config import load_settings
from sonic_deploy.config.network import check_route_cidrs, route_cidrs
from sonic_deploy.config.schema import Route as RouteName
from sonic_deploy.routes import ROUTES, Route, Wire
from sonic_deploy.routes.ecs import outputs as ecs_outputs
from sonic_deploy.routes.ecs import rules as ecs_rules
from sonic_deploy.routes.eks import outputs as eks_outputs
from sonic_deploy.routes.eks import rules as eks_rules
from sonic_deploy.routes.route import RouteRules
from sonic_deploy.routes.sagemaker import outputs as sagemaker_outputs
from sonic_deploy.routes.sagemaker import rules as sagemaker_rules
from tests.conftest import CONFIG_DIR

PACKAGE = Path(__file__).resolve().parents[2] / "sonic_deploy"
# A route's name compared in code: `route == "ecs"`, `"sagemaker" in routes`, `!= 'ecs'`, ...
COMPARISON = re.compile(
    rf"""(==|!=)\s*["']({"|".join(ROUTES)})["']|["']({"|".join(ROUTES)})["']\s+(not\s+)?in\b"""
)
# Where comparing is the point: a route's own folder, and the config loader, which reads `routes`. The
# config's rules ask each route's rules module (`Route.rules`) instead.
ALLOWED = ("routes/", "config/loader.py")


# mypy --strict checks each route's rules module against the protocol the config calls it by (a module
# may implement a protocol); `Route.rules_module()` itself is a cast.
RULES: dict[str, RouteRules] = {"ecs": ecs_rules, "eks": eks_rules, "sagemaker": sagemaker_rules}


def test_each_route_names_its_rules_module() -> None:
    assert {name: route.rules_module() for name, route in ROUTES.items()} == RULES


def test_a_route_takes_the_lower_half_the_upper_or_none() -> None:
    with pytest.raises(ValueError, match="network_half=2: not 0, 1 or None"):
        dataclasses.replace(ROUTES["ecs"], network_half=2)


def _outputs(module: object) -> set[str]:
    return {value for name, value in vars(module).items() if name.isupper() and isinstance(value, str)}


def test_the_config_names_exactly_the_registered_routes() -> None:
    assert set(typing.get_args(RouteName)) == set(ROUTES)


@pytest.mark.parametrize(
    ("route", "module", "fixture"),
    [
        ("ecs", ecs_outputs, "ecs_template"),
        ("eks", eks_outputs, "eks_template"),
        ("sagemaker", sagemaker_outputs, "sagemaker_template"),
    ],
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


def test_each_route_names_its_stack_class_and_id(
    ecs_stack: object, eks_stack: object, sagemaker_stack: object
) -> None:
    for stack in (ecs_stack, eks_stack, sagemaker_stack):
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


# A third route as it would be registered: no half of network.cidr is left for it (the config's `routes`
# names only the registered routes, so the environment here is a stand-in object, not a loaded file).
THIRD = Route(
    name="third",
    title="Third",
    stack_id="SonicThird",
    stack="sonic_deploy.routes.sagemaker.stack:SageMakerStack",
    wire=Wire.CARTESIA,
    connect_outputs=(),
    probe_outputs=(),
    preflight="sonic_deploy.routes.sagemaker.preflight",
    rules="sonic_deploy.routes.sagemaker.rules",
)


def _environment(routes: list[str], pinned: dict[str, str]) -> Any:
    network = SimpleNamespace(cidr="10.60.0.0/16", route_cidrs=pinned)
    return SimpleNamespace(routes=routes, network=network, ecs=None)


def _refusal(env: Any) -> str:
    def fail(field: str, value: object, problem: str, fix: str) -> NoReturn:
        raise ValueError(f"{field} = {value!r}: {problem}. Fix: {fix}")

    with pytest.raises(ValueError) as caught:
        check_route_cidrs(fail, env, ["us-east-2a", "us-east-2b"])
    return str(caught.value)


def test_a_third_route_moves_no_deployed_vpc_and_needs_its_own_range(monkeypatch: pytest.MonkeyPatch) -> None:
    before = route_cidrs("10.60.0.0/16")
    monkeypatch.setitem(ROUTES, THIRD.name, THIRD)
    assert route_cidrs("10.60.0.0/16") == before == {"sagemaker": "10.60.0.0/17", "ecs": "10.60.128.0/17"}
    refused = _refusal(_environment(["sagemaker", "ecs", "third"], {}))
    assert refused.startswith(
        "network.route_cidrs.third = (missing): this route takes no half of network.cidr"
    )
    assert 'third = "10.61.0.0/16"' in refused
    check_route_cidrs(_never, _environment(["ecs", "third"], {"third": "10.61.0.0/16"}), ["a", "b"])
    overlapping = _refusal(_environment(["sagemaker", "third"], {"third": "10.60.0.0/18"}))
    assert overlapping.startswith(
        "network.route_cidrs = {'sagemaker': '10.60.0.0/17', 'third': '10.60.0.0/18'}"
    )


def test_a_second_self_hosted_route_makes_its_own_repositories_and_ecs_keeps_its_names() -> None:
    dev_settings = load_settings(CONFIG_DIR, "dev")
    assert dev_settings.ecr_repository("gpu_worker", "ecs") == "sonic-dev/gpu-worker"
    assert dev_settings.ecr_repository("gpu_worker", "eks") == "sonic-dev/eks/gpu-worker"


@pytest.mark.parametrize("segment", ["EKS", "eks/", "", "-eks", "e--ks"])
def test_an_ecr_segment_is_one_component_of_a_repository_name(segment: str) -> None:
    with pytest.raises(ValueError, match=f"ecr_segment={segment!r}: not one component"):
        dataclasses.replace(THIRD, ecr_segment=segment)


def _never(field: str, value: object, problem: str, fix: str) -> NoReturn:
    raise AssertionError(f"{field}: {problem}")


def test_routes_of_one_wire_name_their_outputs_alike() -> None:
    """`connect` and the probe read a Cartesia route's outputs by one set of names: every route of the wire
    declares those names, so a new one is read as the first is."""
    cartesia = [route for route in ROUTES.values() if route.wire is Wire.CARTESIA]
    assert len(cartesia) >= 2
    assert {(route.connect_outputs, route.probe_outputs) for route in cartesia} == {
        (ecs_outputs.FOR_CONNECT, ecs_outputs.FOR_PROBE)
    }
    assert (eks_outputs.API_URL, eks_outputs.MODEL_ID) == (ecs_outputs.API_URL, ecs_outputs.MODEL_ID)
