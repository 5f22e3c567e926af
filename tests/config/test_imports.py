"""The config and the routes' config modules import in any order, and without aws_cdk: a route's model and
rules import the config's base modules, and the config's loader imports the routes' (docs/architecture.md,
"Import rules")."""

from __future__ import annotations

import subprocess
import sys

import pytest

FIRST = (
    "sonic_deploy.config",
    "sonic_deploy.config.loader",
    "sonic_deploy.config.schema",
    "sonic_deploy.config.rules",
    "sonic_deploy.config.network",
    "sonic_deploy.routes.ecs.config",
    "sonic_deploy.routes.ecs.rules",
    "sonic_deploy.routes.ecs.capacity_rules",
    "sonic_deploy.config.cartesia_api_rules",
    "sonic_deploy.routes.ecs.service_addresses",
    "sonic_deploy.routes.sagemaker.config",
    "sonic_deploy.routes.sagemaker.rules",
)


@pytest.mark.parametrize("module", FIRST)
def test_imported_first_in_a_fresh_interpreter_without_aws_cdk(module: str) -> None:
    code = (
        f"import sys, {module}; from sonic_deploy.config import DEFAULT_ENVIRONMENT, Settings, load_settings;"
        "print('aws_cdk' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
