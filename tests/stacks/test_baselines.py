"""The committed baselines (baselines/<env>/) match what each environment synthesizes now."""

from __future__ import annotations

import pytest
from aws_cdk.assertions import Template

from sonic_deploy.changes import find_stale_baselines
from sonic_deploy.config import STACK_IDS, environment_names
from tests.cdk_context import ROOT
from tests.conftest import CONFIG_DIR, synthesized


@pytest.mark.parametrize("env_name", environment_names(CONFIG_DIR))
def test_baselines_are_current(env_name: str) -> None:
    _, stacks = synthesized(env_name)
    templates = {STACK_IDS[route]: Template.from_stack(stack).to_json() for route, stack in stacks.items()}
    stale = find_stale_baselines(templates, environment=env_name, baselines_dir=ROOT / "baselines")
    assert stale == [], "\n".join(stale)
