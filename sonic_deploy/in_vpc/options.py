"""The in-VPC options of a command, typed (arguments.py reads them from its command line)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class InVpcTask:
    """Inside a task (the hidden options the runner sets): where the run's objects are, which task this is."""

    store_url: str
    index: int
    count: int


@dataclass(frozen=True)
class InVpcOptions:
    """`--in-vpc ENV` and its options (arguments.py); `task` inside one of its tasks."""

    environment: str | None
    tasks: int | None
    config_dir: Path
    profile: str | None
    task: InVpcTask | None
    route: str | None = None
    """`--in-vpc-route`: which of the environment's routes, when two speak the probe's wire."""
