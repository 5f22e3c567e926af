"""Construct IDs from config names, and explicit physical names. IDs are a contract: changing one replaces
the resource."""

from __future__ import annotations

import re

from aws_cdk import Stack
from constructs import IConstruct


def id_from_name(name: str) -> str:
    """`gpu_worker` -> `GpuWorker`, `sagemaker.runtime` -> `SagemakerRuntime`."""
    return "".join(part.capitalize() for part in re.split(r"[_.\-]", name) if part)


def physical_name(scope: IConstruct, name: str) -> str:
    """`<stack name>-<name>`, e.g. `sonic-dev-ecs-Page`: for every name the template sets itself. A name CDK
    derives from the construct path starts with the stack's id (`SonicEcs`), the same in every environment,
    so two environments in one account and Region would collide; the stack's name carries the environment."""
    return f"{Stack.of(scope).stack_name}-{name}"
