"""Which stack an in-VPC run starts its tasks from: the environment's route that serves the probe's target."""

from __future__ import annotations

from pathlib import Path

import pytest

from sonic_deploy.in_vpc.options import InVpcOptions
from sonic_deploy.in_vpc.session import InVpcError, _stack_route

CARTESIA = ["ecs", "eks"]  # the routes a ws or http probe may run from, in the registry's order
FILE = "config/environments/x.toml"


def _options(route: str | None = None) -> InVpcOptions:
    return InVpcOptions("x", None, Path("config"), None, None, route)


def test_the_one_route_the_environment_deploys() -> None:
    assert _stack_route(_options(), CARTESIA, ["eks"], FILE) == "eks"
    assert _stack_route(_options(), CARTESIA, ["sagemaker", "ecs"], FILE) == "ecs"


def test_two_routes_of_the_wire_need_in_vpc_route() -> None:
    with pytest.raises(InVpcError, match=r"deploys the ecs and eks routes.*Fix: add --in-vpc-route ecs"):
        _stack_route(_options(), CARTESIA, ["ecs", "eks"], FILE)
    assert _stack_route(_options("eks"), CARTESIA, ["ecs", "eks"], FILE) == "eks"


def test_a_route_the_environment_or_the_wire_lacks_is_refused() -> None:
    with pytest.raises(
        InVpcError, match=r"does not deploy the ecs or eks route \(routes = \[\"sagemaker\"\]"
    ):
        _stack_route(_options(), CARTESIA, ["sagemaker"], FILE)
    with pytest.raises(InVpcError, match="does not deploy the eks route"):
        _stack_route(_options("eks"), CARTESIA, ["ecs"], FILE)
    with pytest.raises(
        InVpcError, match="--in-vpc-route sagemaker: this probe's target is served by the ecs or eks"
    ):
        _stack_route(_options("sagemaker"), CARTESIA, ["sagemaker", "ecs"], FILE)
