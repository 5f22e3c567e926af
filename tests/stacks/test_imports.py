"""The route stacks (sonic_deploy/routes/<route>/stack.py) import sonic_deploy.stacks.common, and add_stacks
imports the route stacks: either side imports first, in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest

FIRST = ("sonic_deploy.stacks", "sonic_deploy.routes.ecs.stack", "sonic_deploy.routes.sagemaker.stack")


@pytest.mark.parametrize("module", FIRST)
def test_imported_first_in_a_fresh_interpreter(module: str) -> None:
    code = (
        f"import {module}; from sonic_deploy.routes.ecs.stack import EcsStack; "
        "from sonic_deploy.routes.sagemaker.stack import SageMakerStack; "
        "from sonic_deploy.stacks import add_stacks"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
