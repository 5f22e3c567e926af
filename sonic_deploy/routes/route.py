"""What a route is to the rest of sonic-deploy: its name, its stack, the wire its callers speak, the outputs
the tools read. The tools ask a route these things instead of comparing its name (docs/architecture.md,
"How to add a route"). No aws_cdk here: the stack class is imported only when the app asks for it."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

    from aws_cdk import Stack


class Wire(Enum):
    """How a caller reaches the model."""

    CARTESIA = "cartesia"
    """Cartesia's own API (WebSocket and HTTP) behind the route's load balancer, with an API key."""
    SAGEMAKER = "sagemaker"
    """SageMaker's runtime (InvokeEndpointWithResponseStream), signed with the caller's AWS credentials."""


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
    of AWS for it, and `before_deploy(settings, secretsmanager)`, what a deploy would fail on minutes in."""
    runs_licence_proxy: bool = False
    """It runs Cartesia's licence proxy, which `licence upload` feeds (air-gapped)."""

    def preflight_module(self) -> ModuleType:
        return importlib.import_module(self.preflight)

    def stack_class(self) -> type[Stack]:
        """The CDK stack class (imports aws_cdk: the app's business, never an operator tool's)."""
        module, _, name = self.stack.partition(":")
        stack_class: type[Stack] = getattr(importlib.import_module(module), name)
        return stack_class
