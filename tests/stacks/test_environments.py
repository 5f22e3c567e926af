"""Every shipped environment synthesizes offline: no context lookup is left for the CLI to make."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import App

from sonic_deploy.config import environment_names, load_settings
from sonic_deploy.stacks import add_stacks
from tests.cdk_context import cli_context
from tests.conftest import CONFIG_DIR


@pytest.mark.parametrize("env_name", environment_names(CONFIG_DIR))
def test_synthesizes_without_lookups(env_name: str) -> None:
    app = App(context=cli_context())
    stacks = add_stacks(app, load_settings(CONFIG_DIR, env_name))
    assembly = app.synth()
    manifest = json.loads((Path(assembly.directory) / "manifest.json").read_text())
    assert manifest.get("missing") is None, f"{env_name} needs AWS lookups at synth: {manifest['missing']}"
    zones = load_settings(CONFIG_DIR, env_name).environment.network.availability_zones
    assert all(stack.availability_zones == zones for stack in stacks.values())
