"""Construct IDs from config names. IDs are a contract: changing one replaces the resource."""

from __future__ import annotations

import re


def id_from_name(name: str) -> str:
    """`gpu_worker` -> `GpuWorker`, `sagemaker.runtime` -> `SagemakerRuntime`."""
    return "".join(part.capitalize() for part in re.split(r"[_.\-]", name) if part)
