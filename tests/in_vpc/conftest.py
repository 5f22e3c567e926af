"""An in-VPC run on this machine: the stack's outputs from a stubbed DescribeStacks, tasks as processes
(fakes.ProcessEcs), the run's bucket a folder."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from sonic_deploy.config import cloudformation_stack_name
from sonic_deploy.in_vpc import session
from sonic_deploy.in_vpc.protocol import DirectoryStore
from sonic_deploy.in_vpc.runner import Timing
from tests.connect.conftest import REGION, stack_description
from tests.standins.conftest import _dummy_aws

from .fakes import ECS_OUTPUTS, SAGEMAKER_OUTPUTS, ProcessEcs

__all__ = ["_dummy_aws"]

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / "config")
# Short waits, so that a test takes seconds: what each waits for is the same.
FAST = Timing(
    poll_s=0.05,
    describe_every_s=0.5,
    ready_timeout_s=120.0,
    start_delay_s=1.0,
    task_poll_s=0.2,
    relist_after_s=0.2,
    task_idle_timeout_s=120.0,
)


@dataclass
class LocalAws:
    ecs: ProcessEcs
    bucket: Path
    stubber: Stubber

    def runs(self) -> list[Path]:
        return sorted((self.bucket / "runs").iterdir())


@pytest.fixture
def local_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Callable[..., LocalAws]]:
    made: list[LocalAws] = []

    def make(route: str = "ecs", **outputs: str) -> LocalAws:
        cloudformation = boto3.client("cloudformation", region_name=REGION)
        stubber = Stubber(cloudformation)
        name = cloudformation_stack_name("dev", route)
        base = ECS_OUTPUTS if route == "ecs" else SAGEMAKER_OUTPUTS
        stubber.add_response(
            "describe_stacks", stack_description(name, {**base, **outputs}), {"StackName": name}
        )
        stubber.activate()
        ecs = ProcessEcs(tmp_path)
        bucket = tmp_path / "bucket"

        def clients(profile: str | None, region: str) -> tuple[Any, Any, Any]:
            assert region == REGION
            return cloudformation, ecs, None

        monkeypatch.setattr(session, "aws_clients", clients)
        monkeypatch.setattr(
            session, "run_store", lambda s3, name, run_id: DirectoryStore(bucket / "runs" / run_id)
        )
        monkeypatch.setattr(session, "TIMING", FAST)
        local = LocalAws(ecs, bucket, stubber)
        made.append(local)
        return local

    yield make
    for local in made:
        local.ecs.kill_all()
