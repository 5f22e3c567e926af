"""The operator's side of `--in-vpc ENV`, on AWS: the stack's probe task from its outputs, how many tasks a
load needs, and the run's Fargate tasks, started with RunTask and stopped whatever happens."""

from __future__ import annotations

import datetime
import json
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sonic_deploy.config.errors import one_line
from sonic_deploy.in_vpc import outputs
from sonic_deploy.routes import ROUTES

# RunTask starts at most 10 tasks a call; DescribeTasks describes at most 100 (ECS API reference). Each
# task here has its own command (its --task-index), so each RunTask call starts one, and the calls are
# made in batches of this many between progress lines.
RUN_TASK_BATCH = 10
DESCRIBE_TASKS_MAX = 100
# ECS: "A total of 8192 characters are allowed for overrides", JSON included (RunTask, `overrides`).
OVERRIDES_MAX_CHARS = 8192
TAG_KEY = "sonic-deploy:probe-run"


class InVpcError(Exception):
    """The in-VPC run cannot go on; one line saying why and what to do."""


@dataclass(frozen=True)
class ProbeDeployment:
    """The probe task of one deployed stack, from its outputs."""

    environment: str
    route: str
    stack_name: str
    region: str
    cluster: str
    task_definition: str
    container: str
    subnets: tuple[str, ...]
    security_group: str
    bucket: str
    outputs: dict[str, str]


def aws_failure(action: str, error: Exception) -> InVpcError:
    """A boto3 error as one line: credentials and permissions named, with the fix."""
    from botocore.exceptions import ClientError, NoCredentialsError, NoRegionError

    if isinstance(error, NoCredentialsError):
        return InVpcError(
            f"{action}: no AWS credentials. Fix: sign in (e.g. `aws sso login --profile NAME`) and pass "
            "--profile NAME, or set the AWS_* variables"
        )
    if isinstance(error, NoRegionError):
        return InVpcError(f"{action}: no Region. Fix: the environment's config names it (region = ...)")
    if isinstance(error, ClientError):
        code = str(error.response.get("Error", {}).get("Code", ""))
        message = str(error.response.get("Error", {}).get("Message", error))
        fix = "retry; if it persists, check the Region and the AWS Health Dashboard"
        if "AccessDenied" in code or "not authorized" in message:
            fix = (
                "grant the operator's role what docs/probe.md's \"From inside the VPC\" lists (run from inside the "
                "stack's own VPC, the S3 gateway endpoint's policy applies too: it lets the probe's keys through)"
            )
        elif code in (
            "ExpiredToken",
            "ExpiredTokenException",
            "InvalidClientTokenId",
            "UnrecognizedClientException",
        ):
            fix = "sign in again (e.g. `aws sso login --profile NAME`)"
        return InVpcError(f"{action} failed: {code}: {' '.join(message.split())}. Fix: {fix}")
    return InVpcError(
        f"{action}: cannot talk to AWS: {error}. Fix: check --profile, the credentials and the network"
    )


def find_deployment(cloudformation: Any, environment: str, route: str, stack_name: str) -> ProbeDeployment:
    """The stack's probe task, or InVpcError: not deployed, not in a usable state, or an older stack without
    the probe task's outputs (cloudformation:DescribeStacks)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from sonic_deploy.config import STACK_IDS
    from sonic_deploy.connect.deployment import NOT_READY
    from sonic_deploy.stack_outputs import describe_stack

    deploy = (
        f"make deploy ENV={environment} ROUTE={route} (cdk deploy {STACK_IDS[route]} -c env={environment})"
    )
    try:
        stack = describe_stack(cloudformation, stack_name)
    except (BotoCoreError, ClientError) as error:
        raise aws_failure(f"cloudformation:DescribeStacks on {stack_name}", error) from None
    if stack is None:
        raise InVpcError(f"--in-vpc {environment}: stack {stack_name} is not deployed. Fix: {deploy}")
    if stack.status in NOT_READY:
        raise InVpcError(
            f"--in-vpc {environment}: stack {stack_name} is {stack.status}, not a working deployment. Fix: read "
            f"its events in the CloudFormation console, then {deploy}"
        )
    missing = stack.missing((*outputs.PROBE_OUTPUTS, *ROUTES[route].probe_outputs))
    if missing:
        raise InVpcError(
            f"--in-vpc {environment}: stack {stack_name} has no output {', '.join(missing)}: it was deployed by an "
            f"older sonic-deploy, without the probe task. Fix: deploy it again with this one: {deploy}"
        )
    out = stack.outputs
    return ProbeDeployment(
        environment=environment,
        route=route,
        stack_name=stack_name,
        region=out["Region"],
        cluster=out[outputs.PROBE_CLUSTER],
        task_definition=out[outputs.PROBE_TASK_DEFINITION],
        container=out[outputs.PROBE_CONTAINER],
        subnets=tuple(s.strip() for s in out[outputs.PROBE_SUBNETS].split(",") if s.strip()),
        security_group=out[outputs.PROBE_SECURITY_GROUP],
        bucket=out[outputs.PROBE_BUCKET],
        outputs=dict(out),
    )


def tasks_needed(
    concurrency: int | None, rate: float | None, streams_per_task: int, rate_per_task: float
) -> int:
    """The tasks a load needs: the highest closed-loop concurrency or open-loop rate, over what one task
    drives (config [probe] streams_per_task, rate_per_task)."""
    needed = 1
    if concurrency:
        needed = max(needed, math.ceil(concurrency / streams_per_task))
    if rate:
        needed = max(needed, math.ceil(rate / rate_per_task))
    return needed


def choose_tasks(needed: int, requested: int | None, max_tasks: int, load: str, config_file: str) -> int:
    """`--tasks N` if given, else what the load needs; refused above [probe] max_tasks."""
    count = requested or needed
    if count > max_tasks:
        given = f"--tasks {requested}" if requested else f"{load} needs {needed} tasks"
        raise InVpcError(
            f"{given}, more than probe.max_tasks = {max_tasks} ({config_file}). Fix: a lighter load, "
            f"--tasks {max_tasks} (more streams each), or raise [probe] max_tasks (or streams_per_task, rate_per_task)"
        )
    return count


def new_run_id(route: str) -> str:
    """`ws-20261202T011500Z-3f9a1c`: sortable, and usable as RunTask's startedBy (letters, digits, -, _)."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{route}-{stamp}-{secrets.token_hex(3)}"


def _stopped_reason(task: dict[str, Any]) -> str:
    """Why ECS stopped a task: its stoppedReason and stopCode, and each container's reason or exit code
    (DescribeTasks; e.g. "CannotPullContainerError: ..." when the image cannot be pulled)."""
    parts = [str(task.get("stoppedReason") or task.get("stopCode") or "stopped")]
    for container in task.get("containers", []):
        if container.get("reason"):
            parts.append(f"{container.get('name', 'container')}: {container['reason']}")
        elif container.get("exitCode") not in (None, 0):
            parts.append(f"{container.get('name', 'container')} exited {container['exitCode']}")
    return "; ".join(" ".join(part.split()) for part in parts)


class Fleet:
    """The tasks this run started on ECS, and their stop."""

    def __init__(
        self, ecs: Any, deployment: ProbeDeployment, run_id: str, say: Callable[[str], None]
    ) -> None:
        self.ecs, self.deployment, self.run_id, self.say = ecs, deployment, run_id, say
        self.arns: list[str] = []  # index i is task i
        self.stopped = False

    def start(self, count: int, command: Callable[[int], list[str]]) -> None:
        """Start `count` tasks, task i with `command(i)`. A failure (capacity, a quota, a denied PassRole)
        stops the ones already started and raises InVpcError with ECS's reason."""
        from botocore.exceptions import BotoCoreError, ClientError

        d = self.deployment
        for index in range(count):
            overrides = {"containerOverrides": [{"name": d.container, "command": command(index)}]}
            if len(json.dumps(overrides)) > OVERRIDES_MAX_CHARS:
                raise InVpcError(
                    f"the task's command is longer than ECS's {OVERRIDES_MAX_CHARS} characters of overrides. Fix: "
                    "fewer or shorter options (--transcripts FILE travels through the bucket, not the command)"
                )
            try:
                response = self.ecs.run_task(
                    cluster=d.cluster,
                    taskDefinition=d.task_definition,
                    count=1,
                    launchType="FARGATE",
                    networkConfiguration={
                        "awsvpcConfiguration": {
                            "subnets": list(d.subnets),
                            "securityGroups": [d.security_group],
                            "assignPublicIp": "DISABLED",
                        }
                    },
                    overrides=overrides,
                    startedBy=self.run_id[:128],
                    tags=[{"key": TAG_KEY, "value": self.run_id}],
                )
            except (BotoCoreError, ClientError) as error:
                raise aws_failure(f"ecs:RunTask of task {index} of {count}", error) from None
            failures = response.get("failures", [])
            if failures or not response.get("tasks"):
                why = "; ".join(
                    f"{f.get('reason', '?')}" + (f" ({f['detail']})" if f.get("detail") else "")
                    for f in failures
                )
                raise InVpcError(
                    f"ecs:RunTask could not start task {index} of {count}: {why or 'no task in the answer'}. Fix: "
                    "for capacity, retry later or in other subnets; for a quota, fewer --tasks or a quota increase"
                )
            self.arns.append(str(response["tasks"][0]["taskArn"]))
            if (index + 1) % RUN_TASK_BATCH == 0 or index + 1 == count:
                self.say(f"started {index + 1} of {count} tasks")

    def describe(self) -> list[dict[str, Any]]:
        from botocore.exceptions import BotoCoreError, ClientError

        found: list[dict[str, Any]] = []
        for first in range(0, len(self.arns), DESCRIBE_TASKS_MAX):
            chunk = self.arns[first : first + DESCRIBE_TASKS_MAX]
            try:
                response = self.ecs.describe_tasks(cluster=self.deployment.cluster, tasks=chunk)
            except (BotoCoreError, ClientError) as error:
                raise aws_failure("ecs:DescribeTasks", error) from None
            found.extend(response.get("tasks", []))
        return found

    def check_running(self, tasks: list[dict[str, Any]] | None = None) -> None:
        """InVpcError if any task has stopped (or is stopping), naming ECS's reason."""
        for task in self.describe() if tasks is None else tasks:
            if task.get("lastStatus") in ("DEACTIVATING", "STOPPING", "DEPROVISIONING", "STOPPED") or (
                task.get("desiredStatus") == "STOPPED"
            ):
                index = self.arns.index(task["taskArn"]) if task.get("taskArn") in self.arns else "?"
                raise InVpcError(
                    f"task {index} ({task.get('taskArn')}) stopped: {_stopped_reason(task)}. Fix: read its log "
                    f"(the task definition's log group); an image that cannot be pulled needs the deploy to push it"
                )

    def _unrecorded(self) -> list[str]:
        """Tasks of this run that ECS knows and this runner does not: one whose RunTask was answered just as
        Ctrl-C came (ListTasks by startedBy lists the tasks whose desired status is RUNNING)."""
        try:
            pages = self.ecs.get_paginator("list_tasks").paginate(
                cluster=self.deployment.cluster, startedBy=self.run_id[:128]
            )
            listed = [str(arn) for page in pages for arn in page.get("taskArns", [])]
        except Exception as error:
            self.say(
                f"could not list the run's tasks ({error}): look for startedBy {self.run_id} in the console"
            )
            return []
        return [arn for arn in listed if arn not in self.arns]

    def stop_all(self, reason: str, relist_after_s: float = 0.0) -> None:
        """StopTask every task started (each, whatever the others do), and any other of this run's that ECS
        lists, now and again `relist_after_s` later; never raises."""
        if self.stopped:
            return
        self.stopped = True
        stopped: set[str] = set()
        failed: list[str] = []
        for sweep in range(2 if relist_after_s > 0 else 1):
            if sweep:
                time.sleep(relist_after_s)
            self.arns.extend(arn for arn in self._unrecorded() if arn not in self.arns)
            for arn in self.arns:
                if arn in stopped:
                    continue
                stopped.add(arn)
                try:
                    self.ecs.stop_task(cluster=self.deployment.cluster, task=arn, reason=reason[:255])
                except Exception as error:
                    failed.append(f"{arn}: {one_line(str(error))}")
        if self.arns:
            self.say(f"stopped {len(self.arns) - len(failed)} of {len(self.arns)} tasks")
        for line in failed:
            self.say(
                f"could not stop {line}: stop it in the ECS console (cluster {self.deployment.cluster}); it stops "
                f"itself at its next poll (the run's stop.json)"
            )
