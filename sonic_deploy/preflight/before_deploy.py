"""What `make deploy` checks before the CDK runs (`sonic-deploy preflight --before-deploy ROUTE`): the part
of preflight that a deploy would otherwise fail on minutes in, and that costs seconds to ask.

- Docker: `cdk deploy` builds the probe image (both routes) with the Docker the CDK finds (`CDK_DOCKER`,
  else `docker`: aws-cdk's cdk-assets); without a running daemon the deploy fails after the synth and the
  image copy's wait, and a first create rolls back.
- The ECS secrets: a task whose secret is missing fails to start, and the services wait for it until the
  circuit breaker gives up, tens of minutes in.
The rest of preflight (quotas, offerings, reservations) changes while you wait: run it on its own.
"""

from __future__ import annotations

import shlex
import subprocess
from typing import TYPE_CHECKING

from sonic_deploy.config import Settings
from sonic_deploy.preflight.results import CheckResult, failed, passed
from sonic_deploy.routes import ROUTES

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager import SecretsManagerClient

DOCKER_CHECK = "Docker (cdk deploy builds the probe image)"
DOCKER_TIMEOUT_S = 30


def check_docker(docker: str) -> CheckResult:
    """`<docker> info` answers: the command exists and its daemon runs."""
    command = [*shlex.split(docker), "info", "--format", "{{.ServerVersion}}"]
    start = "start Docker (Docker Desktop, or `sudo systemctl start docker`) and run make deploy again"
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=DOCKER_TIMEOUT_S, check=False)
    except FileNotFoundError:
        return failed(
            DOCKER_CHECK, f"no command {command[0]!r}", "install Docker, or set CDK_DOCKER to its command"
        )
    except subprocess.TimeoutExpired:
        return failed(DOCKER_CHECK, f"`{docker} info` did not answer in {DOCKER_TIMEOUT_S} s", start)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return failed(DOCKER_CHECK, f"`{docker} info` failed: {said}", start)
    return passed(DOCKER_CHECK, f"server {done.stdout.strip() or 'running'}")


def before_deploy(
    settings: Settings, route: str, *, docker: str, secretsmanager: SecretsManagerClient
) -> list[CheckResult]:
    """Docker for every route, then the route's own (its preflight module's `before_deploy`)."""
    return [check_docker(docker), *ROUTES[route].preflight_module().before_deploy(settings, secretsmanager)]
