"""`sonic-deploy licence upload --env NAME --file LICENCE`: put Cartesia's offline licence where an air-gapped
deployment can read it, and (ECS) restart the licence proxy so that it does. On EKS the proxy's loader sends a
new secret value by itself (docs/eks.md, section 12): the command stores it and says so.

The stack (LicenceStore) imports the licence secret by name and gives the proxy's task a loader container
that POSTs the secret's licence to the proxy on localhost when the task starts. This command writes the
licence into that secret (creating it the first time, before the first deploy), and, once the stack is
deployed, starts a new deployment of the proxy service and waits until the loader has handed the licence
over. Only AWS APIs are called: the VPC needs no way in.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sonic_deploy.arguments import ENVIRONMENT, config_folder, input_file, real
from sonic_deploy.config import Settings, load_settings, require_config_dir
from sonic_deploy.routes import ROUTES
from sonic_deploy.routes.ecs import outputs as ecs_outputs
from sonic_deploy.routes.route import Route
from sonic_deploy.stack_outputs import describe_stack
from sonic_deploy.user_files import RefusedFileError, check_regular, read_regular

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_ecs import ECSClient
    from mypy_boto3_secretsmanager import SecretsManagerClient

    from sonic_deploy.config.cartesia import LicenceSettings, SecretsConfig

# Secrets Manager holds at most 65,536 bytes of SecretString; base64 makes 3 bytes into 4.
MAX_LICENCE_BYTES = 65536 // 4 * 3
LOADER = "licence-loader"
POLL_S = 10
# A route whose loader reloads (EKS): the CSI driver's rotation poll (2 min) and the loader's own (30 s).
RELOAD_WITHIN_S = 180


class LicenceError(Exception):
    """A licence upload that cannot go on; the message says what to do."""


@dataclass(frozen=True)
class LicenceClients:
    cloudformation: CloudFormationClient
    secretsmanager: SecretsManagerClient
    ecs: ECSClient


def add_parser(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "licence",
        help="upload the offline licence of an air-gapped ECS or EKS deployment",
        description="Air-gapped mode: write Cartesia's offline licence into the stack's secret, whose loader "
        "beside the licence proxy uploads it (POST /license) on localhost: ECS after a restart of the proxy "
        "this command starts, EKS by itself within minutes.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    upload = actions.add_parser("upload", help="upload a licence file for the licence proxy to load")
    upload.add_argument("--env", required=True, type=ENVIRONMENT, help="environment in config/environments/")
    upload.add_argument(
        "--file",
        required=True,
        type=input_file("the offline licence file from Cartesia", text=False),
        help="the offline licence file from Cartesia",
    )
    upload.add_argument("--config-dir", type=config_folder, default=Path("config"), help="the config/ folder")
    upload.add_argument("--profile", help="AWS profile to use (default: the usual credential chain)")
    upload.add_argument("--no-wait", action="store_true", help="return once the new deployment has started")
    upload.add_argument(
        "--timeout",
        type=real(0, 86400, "seconds", low_open=True),
        default=900.0,
        help="seconds to wait for the deployment (900)",
    )
    upload.set_defaults(func=run_licence_command, check=check_licence, command_parser=upload)


def check_licence(args: argparse.Namespace) -> str | None:
    """The licence file, read before any AWS call: a mistake in it is the user's (exit 2)."""
    try:
        read_licence(args.file)
    except LicenceError as error:
        return str(error)
    return None


def run_licence_command(args: argparse.Namespace) -> int:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    require_config_dir(args.config_dir)
    settings = load_settings(args.config_dir, args.env)
    try:
        licence = read_licence(args.file)
        check_air_gapped(settings)
        session = boto3.Session(profile_name=args.profile)
        region = settings.environment.region
        clients = LicenceClients(
            cloudformation=session.client("cloudformation", region_name=region),
            secretsmanager=session.client("secretsmanager", region_name=region),
            ecs=session.client("ecs", region_name=region),
        )
        upload_licence(clients, settings, licence, wait=not args.no_wait, timeout_s=args.timeout)
    except LicenceError as error:
        print(f"sonic-deploy licence: {error}", file=sys.stderr)
        return 1
    except (BotoCoreError, ClientError) as error:
        print(
            f"sonic-deploy licence: AWS refused or could not be reached: {error}. Fix: check --profile and that "
            "the credentials may call secretsmanager:PutSecretValue and CreateSecret, "
            "cloudformation:DescribeStacks, and ecs:UpdateService, DescribeServices, ListTasks, DescribeTasks",
            file=sys.stderr,
        )
        return 1
    return 0


def read_licence(path: Path) -> bytes:
    try:  # the size first: an 8 GiB file is refused from it, not read into memory
        size = check_regular(path)
        if size > MAX_LICENCE_BYTES:
            raise LicenceError(
                f"{path}: {size} bytes is more than a secret holds ({MAX_LICENCE_BYTES} bytes once "
                "base64-encoded). Fix: check it is the licence file, not a bundle"
            )
        licence = read_regular(path, limit=MAX_LICENCE_BYTES)
    except RefusedFileError as error:
        raise LicenceError(f"{path}: the licence file: {error.problem}. Fix: pass --file PATH") from None
    if not licence:
        raise LicenceError(f"{path}: the licence file is empty. Fix: pass the file Cartesia sent")
    if b"\0" in licence:
        raise LicenceError(
            f"{path}: the file holds NUL bytes, which the loader's BusyBox wget would cut the upload at. Fix: "
            "pass the licence as Cartesia sent it (a text file); if that is the file, ask Cartesia for a text one"
        )
    if len(licence) > MAX_LICENCE_BYTES:
        raise LicenceError(
            f"{path}: {len(licence)} bytes is more than a secret holds ({MAX_LICENCE_BYTES} bytes once "
            "base64-encoded). Fix: check it is the licence file, not a bundle"
        )
    return licence


def licence_routes(settings: Settings) -> list[str]:
    """The environment's routes that run Cartesia's licence proxy in air-gapped mode, or LicenceError."""
    proxies = [name for name, route in ROUTES.items() if route.runs_licence_proxy]
    deployed = [route for route in settings.environment.routes if route in proxies]
    if not deployed:
        raise LicenceError(
            f"environment {settings.environment_name} does not deploy the {' or '.join(proxies)} route. Fix: "
            f"pick an environment whose routes include {' or '.join(json.dumps(name) for name in proxies)}"
        )
    air_gapped: list[str] = [
        route for route in deployed if licence_table(settings, route)[0].licence_mode == "air-gapped"
    ]
    if not air_gapped:
        raise LicenceError(
            f'environment {settings.environment_name} runs in licence_mode = "connected": its licence proxy checks '
            'the licence online, there is nothing to upload. Fix: set licence_mode = "air-gapped" (and '
            "nat_gateways = 0) to run without egress"
        )
    return air_gapped


def licence_table(settings: Settings, route: str) -> tuple[LicenceSettings, SecretsConfig]:
    """The licence mode and secrets of a route that runs the proxy."""
    table = ROUTES[route].rules_module().licence(settings.environment)
    assert table is not None, "a route that runs the licence proxy has its licence settings"
    return table


def check_air_gapped(settings: Settings) -> None:
    licence_routes(settings)


def stack_outputs(cloudformation: CloudFormationClient, stack_name: str) -> dict[str, str] | None:
    """The deployed stack's outputs, or None when the stack is not deployed yet."""
    stack = describe_stack(cloudformation, stack_name)
    if stack is None:
        return None
    missing = stack.missing(ecs_outputs.FOR_LICENCE)
    if missing:
        raise LicenceError(
            f"stack {stack_name} has no output {', '.join(missing)}: it was deployed without the licence "
            "loader (connected mode, or an older sonic-deploy). Fix: deploy it again in air-gapped mode"
        )
    return stack.outputs


def store_licence(secrets: SecretsManagerClient, name: str, licence: bytes) -> None:
    """Write the licence (base64) into the secret, creating it the first time."""
    value = base64.b64encode(licence).decode("ascii")
    try:
        secrets.put_secret_value(SecretId=name, SecretString=value)
    except secrets.exceptions.ResourceNotFoundException:
        secrets.create_secret(
            Name=name,
            SecretString=value,
            Description="Cartesia offline licence, base64 (sonic-deploy licence)",
        )


def upload_licence(
    clients: LicenceClients,
    settings: Settings,
    licence: bytes,
    *,
    wait: bool = True,
    timeout_s: float = 900.0,
    say: Callable[[str], None] = print,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    stored: set[str] = set()
    for name in licence_routes(settings):
        secret = settings.licence_secret_name(licence_table(settings, name)[1])
        if secret not in stored:  # two routes may read one secret
            store_licence(clients.secretsmanager, secret, licence)
            stored.add(secret)
            say(f"licence stored in the secret {secret}")
        _hand_over(clients, settings, ROUTES[name], wait, _Deadline(timeout_s, sleep, clock), say)


def _hand_over(
    clients: LicenceClients,
    settings: Settings,
    route: Route,
    wait: bool,
    waiting: _Deadline,
    say: Callable[[str], None],
) -> None:
    """Get the stored licence to the route's running proxy: its loader's own watch, or (ECS) a restart."""
    if route.licence_reloads:
        say(
            f"the {route.title} licence proxy's loader sends it within {RELOAD_WITHIN_S // 60} minutes (the CSI "
            "driver refreshes the mounted secret; a first deploy loads it at start); its readiness says when: "
            "kubectl -n <namespace> get pod -l app.kubernetes.io/name=licence-proxy"
        )
        return
    stack_name = settings.stack_name(route.name)
    outputs = stack_outputs(clients.cloudformation, stack_name)
    if outputs is None:
        say(
            f"{stack_name} is not deployed yet: deploy it now; the licence proxy loads the licence when it starts"
        )
        return
    cluster, service = outputs[ecs_outputs.CLUSTER_NAME], outputs[ecs_outputs.LICENCE_PROXY_SERVICE]
    clients.ecs.update_service(cluster=cluster, service=service, forceNewDeployment=True)
    say(f"new deployment of {service} started: its loader uploads the licence when the task starts")
    if not wait:
        return
    task_definition = _wait_for_rollout(clients.ecs, cluster, service, waiting)
    _wait_for_loader(clients.ecs, cluster, service, task_definition, waiting)
    say(f"the licence proxy took the licence (the {LOADER} container of the new {service} task exited 0)")


class _Deadline:
    """One timeout shared by the waits of an upload; `pause` polls again, or gives up naming the state."""

    def __init__(self, timeout_s: float, sleep: Callable[[float], None], clock: Callable[[], float]) -> None:
        self.timeout_s, self._sleep, self._clock = timeout_s, sleep, clock
        self._ends_at = clock() + timeout_s

    def pause(self, state: str) -> None:
        if self._clock() >= self._ends_at:
            raise LicenceError(
                f"{state} after {self.timeout_s:g} s. Fix: watch it in the ECS console; the licence is stored "
                "and the proxy loads it whenever its task starts"
            )
        self._sleep(POLL_S)


def _wait_for_rollout(ecs: ECSClient, cluster: str, service: str, waiting: _Deadline) -> str:
    """Wait until the forced deployment has finished; return its task definition."""
    while True:
        described = ecs.describe_services(cluster=cluster, services=[service])["services"]
        primary = next(
            (d for s in described for d in s.get("deployments", []) if d.get("status") == "PRIMARY"), None
        )
        if primary is None:
            raise LicenceError(
                f"service {service} is not in cluster {cluster}. Fix: check the stack in the CloudFormation "
                "console; deploy it again if the service was deleted by hand"
            )
        state = primary.get("rolloutState", "IN_PROGRESS")
        if state == "COMPLETED":
            return primary["taskDefinition"]
        if state == "FAILED":
            raise LicenceError(
                f"the new deployment of {service} failed: {primary.get('rolloutStateReason', 'no reason given')}."
                " Fix: read the proxy's and the loader's logs (ECS console, the service's Logs tab)"
            )
        waiting.pause(f"the new deployment of {service} is still {state}")


def _wait_for_loader(
    ecs: ECSClient, cluster: str, service: str, task_definition: str, waiting: _Deadline
) -> None:
    """Wait until the loader of the new task has exited; its exit code says whether the proxy took it."""
    while True:
        arns = ecs.list_tasks(cluster=cluster, serviceName=service, desiredStatus="RUNNING")["taskArns"]
        tasks = ecs.describe_tasks(cluster=cluster, tasks=arns)["tasks"] if arns else []
        loaders = [
            container
            for task in tasks
            if task.get("taskDefinitionArn") == task_definition
            for container in task.get("containers", [])
            if container.get("name") == LOADER
        ]
        codes = [c["exitCode"] for c in loaders if "exitCode" in c]
        if codes and codes[0] == 0:
            return
        if codes:
            raise LicenceError(
                f"the {LOADER} container exited {codes[0]}: the licence proxy did not take the licence. Fix: "
                f"read the {LOADER} and licence-proxy log streams in the proxy's log group; check "
                "ecs.licence_content_type and that the file is the licence Cartesia sent"
            )
        waiting.pause(f"the {LOADER} container has not finished")
