"""The operator's side of `--in-vpc ENV`: find the stack's probe task, start N Fargate tasks with RunTask,
wait until each says it is ready, publish each level, merge what the tasks measured (HDR histograms merge
exactly, as those of local worker processes do: workers.py), and stop every task it started, whatever
happens (success, an error, Ctrl-C, SIGTERM)."""

from __future__ import annotations

import argparse
import datetime
import json
import math
import secrets
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sonic_deploy.config.errors import one_line
from sonic_deploy.probe.in_vpc.protocol import (
    DONE,
    RUN,
    STOP,
    ObjectStore,
    RunManifest,
    command_key,
    decode_stats,
    get_json,
    level_command,
    put_json,
    samples_key,
    stats_key,
    turn_command,
)
from sonic_deploy.probe.load import Level
from sonic_deploy.probe.stats import LevelStats

# The outputs of the probe-task construct (both stacks), and each route's own that a run defaults to.
PROBE_OUTPUTS = (
    "ProbeCluster",
    "ProbeTaskDefinition",
    "ProbeContainer",
    "ProbeSubnets",
    "ProbeSecurityGroup",
    "ProbeBucket",
)
ROUTE_OUTPUTS = {
    "ecs": ("ApiUrl", "ModelId", "CartesiaVersion", "Region"),
    "sagemaker": ("EndpointName", "Region"),
}
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


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (a closed terminal, an ended SSH session), handled as Ctrl-C is (every task stopped,
    the finished levels kept); exit 128 + the signal's number (143, 129)."""

    def __init__(self, signum: int = signal.SIGTERM) -> None:
        super().__init__()
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@dataclass(frozen=True)
class Timing:
    """How often the runner looks, and how long it waits. Tests make them short."""

    poll_s: float = 1.0
    # DescribeTasks this often while waiting (a stopped task is noticed within it).
    describe_every_s: float = 10.0
    # From RunTask to every task ready: Fargate's provisioning, the image pull, the interpreter's start.
    ready_timeout_s: float = 600.0
    # A level starts this long after it is published: every task polls once or more in between.
    start_delay_s: float = 5.0
    # What the tasks poll at, and when they give up on a runner that vanished.
    task_poll_s: float = 1.0
    task_idle_timeout_s: float = 900.0
    # ListTasks again this long after the first stop sweep: a task whose RunTask answer was lost may not be
    # listed at once ("might not be immediately visible to all subsequent commands": RunTask, ECS API
    # reference, eventual consistency).
    relist_after_s: float = 5.0
    # A level's results are awaited for at most its own length (requests x --timeout, or its duration and
    # warm-ups) plus this: a task that hangs without failing cannot hold the run forever.
    collect_grace_s: float = 120.0


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


def _aws_failure(action: str, error: Exception) -> InVpcError:
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
        raise _aws_failure(f"cloudformation:DescribeStacks on {stack_name}", error) from None
    if stack is None:
        raise InVpcError(f"--in-vpc {environment}: stack {stack_name} is not deployed. Fix: {deploy}")
    if stack.status in NOT_READY:
        raise InVpcError(
            f"--in-vpc {environment}: stack {stack_name} is {stack.status}, not a working deployment. Fix: read "
            f"its events in the CloudFormation console, then {deploy}"
        )
    missing = stack.missing((*PROBE_OUTPUTS, *ROUTE_OUTPUTS[route]))
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
        cluster=out["ProbeCluster"],
        task_definition=out["ProbeTaskDefinition"],
        container=out["ProbeContainer"],
        subnets=tuple(s.strip() for s in out["ProbeSubnets"].split(",") if s.strip()),
        security_group=out["ProbeSecurityGroup"],
        bucket=out["ProbeBucket"],
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


def _canonical(parser: argparse.ArgumentParser, token: str) -> tuple[str | None, bool]:
    """The option a `--flag` or `--flag=value` token is (argparse also takes unique prefixes), and whether
    its value is in the same token."""
    flag, has_value = token.split("=", 1)[0], "=" in token
    actions = parser._option_string_actions
    if flag in actions:
        return flag, has_value
    matches = {
        actions[name].dest: name for name in actions if name.startswith(flag) and name.startswith("--")
    }
    return (next(iter(matches.values())), has_value) if len(matches) == 1 else (None, has_value)


def split_options(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[tuple[str | None, list[str]]]:
    """argv as (option, its tokens) pairs; positionals are (None, [token])."""
    pairs: list[tuple[str | None, list[str]]] = []
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("--") and token != "--":
            flag, inline = _canonical(parser, token)
            action = parser._option_string_actions.get(flag or "")
            takes = action is not None and action.nargs != 0 and not inline
            pairs.append((flag, tokens[i : i + 1 + int(takes)]))
            i += 1 + int(takes)
        else:
            pairs.append((None, [token]))
            i += 1
    return pairs


def task_argv(
    parser: argparse.ArgumentParser, argv: Sequence[str], drop: set[str], add: Sequence[str]
) -> list[str]:
    """The probe's own command line for a task: the options in `drop` (and their values) left out, and
    `add` appended."""
    kept = [token for flag, tokens in split_options(parser, argv) if flag not in drop for token in tokens]
    return [*kept, *add]


def given(parser: argparse.ArgumentParser, argv: Sequence[str], option: str) -> bool:
    return any(flag == option for flag, _ in split_options(parser, argv))


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
                raise _aws_failure(f"ecs:RunTask of task {index} of {count}", error) from None
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
                raise _aws_failure("ecs:DescribeTasks", error) from None
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


class InVpcRun:
    """One run's conversation with its tasks through the store: ready, then each command and its results."""

    def __init__(
        self, fleet: Fleet, store: ObjectStore, count: int, timing: Timing, say: Callable[[str], None]
    ) -> None:
        self.fleet, self.store, self.count, self.timing, self.say = fleet, store, count, timing, say
        self.seq = 0
        self.done = False
        # Per command: each task's facts (late start, its start and end on its clock, its requests), for
        # summary.json's in_vpc block.
        self.facts: list[dict[str, Any]] = []

    def start(self, command: Callable[[int], list[str]]) -> None:
        manifest = RunManifest(
            self.fleet.run_id, self.count, self.timing.task_poll_s, self.timing.task_idle_timeout_s
        )
        put_json(self.store, RUN, manifest.as_json())
        self.fleet.start(self.count, command)
        self._wait_ready()

    def _check_failed(self) -> None:
        for key in self.store.list("failed/"):
            try:
                report = get_json(self.store, key)
            except ValueError:
                report = None
            if not isinstance(report, dict):
                report = {"error": f"{key} is not a JSON object"}
            # What a task wrote, escaped: it reaches the operator's terminal.
            raise InVpcError(
                f"task {one_line(str(report.get('index', '?'))[:20])} failed: "
                f"{one_line(str(report.get('error', '?'))[:2000])}. Fix: read its log; the run's objects are in "
                f"{self.store.where()}"
            )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.timing.ready_timeout_s
        described_at = -math.inf
        shown = ""
        statuses: Counter[str] = Counter()
        while True:
            ready = len(self.store.list("ready/"))
            self._check_failed()
            if time.monotonic() - described_at >= self.timing.describe_every_s:
                tasks = self.fleet.describe()
                self.fleet.check_running(tasks)
                statuses = Counter(str(task.get("lastStatus")) for task in tasks)
                described_at = time.monotonic()
            line = (
                ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()))
                + f"; {ready} of {self.count} ready"
            )
            if line != shown:
                self.say(f"tasks: {line}")
                shown = line
            if ready >= self.count:
                return
            if time.monotonic() > deadline:
                raise InVpcError(
                    f"only {ready} of {self.count} tasks ready after {self.timing.ready_timeout_s:g} s ({line}). Fix: "
                    "read the tasks' log; PROVISIONING for long is Fargate capacity or the subnets' free addresses"
                )
            time.sleep(self.timing.poll_s)

    def _publish(self, command: dict[str, Any]) -> int:
        seq = self.seq
        put_json(self.store, command_key(seq), command)
        self.seq += 1
        return seq

    def _collect(self, seq: int, what: str, within_s: float) -> list[dict[str, Any]]:
        """Each task's stats.json of command `seq` (waiting for all of them, for at most `within_s` and the
        grace), in task order."""
        described_at = began = time.monotonic()
        deadline = began + within_s + self.timing.collect_grace_s
        while True:
            self._check_failed()
            done = {key for key in self.store.list(f"results/{seq}/") if key.endswith("/stats.json")}
            if len(done) >= self.count:
                break
            if time.monotonic() > deadline:
                raise InVpcError(
                    f"{what}: only {len(done)} of {self.count} tasks wrote their results within "
                    f"{deadline - began:.0f} s, the level's own length and {self.timing.collect_grace_s:g} s. Fix: read "
                    f"the tasks' log; the run's objects are in {self.store.where()}"
                )
            if time.monotonic() - described_at >= self.timing.describe_every_s:
                self.fleet.check_running()
                described_at = time.monotonic()
            time.sleep(self.timing.poll_s)
        results = []
        for index in range(self.count):
            key = stats_key(seq, index)
            try:
                result = get_json(self.store, key)
            except ValueError as error:
                raise self._malformed(key, error) from None
            if not isinstance(result, dict):
                raise InVpcError(f"{what}: task {index} wrote no result in {self.store.where()} ({key})")
            results.append(result)
        return results

    def _malformed(self, key: str, error: BaseException) -> InVpcError:
        return InVpcError(
            f"{self.store.where()}{key} is not what a task writes: {one_line(repr(error))[:300]}. Fix: read the "
            "task's log; only the run's tasks may write its results (the bucket policy)"
        )

    def samples(self, seq: int) -> list[dict[str, Any]]:
        """Every task's samples of command `seq`; InVpcError naming the key if one is missing or malformed."""
        lines: list[dict[str, Any]] = []
        for index in range(self.count):
            key = samples_key(seq, index)
            body = self.store.get(key)
            if body is None:
                raise InVpcError(
                    f"task {index} wrote its stats but no {key} in {self.store.where()}. Fix: read its log"
                )
            try:
                for line in body.decode().splitlines():
                    if line.strip():
                        sample = json.loads(line)
                        if not isinstance(sample, dict):
                            raise ValueError(f"a line is not a JSON object: {line[:80]!r}")
                        lines.append(sample)
            except ValueError as error:
                raise self._malformed(key, error) from None
        return lines

    def partial(self) -> list[dict[str, Any]]:
        """After an interruption: the samples of the last command the tasks uploaded so far (whole where a
        task finished, else its parts); never raises (what cannot be read is skipped, and said)."""
        if self.seq == 0 or self.done:
            return []
        seq = self.seq - 1
        lines: list[dict[str, Any]] = []
        for index in range(self.count):
            try:
                keys = [samples_key(seq, index)] if self.store.get(stats_key(seq, index)) is not None else []
                parts = self.store.list(f"results/{seq}/{index}/part-")
                for key in keys or [k for k in parts if k.endswith(".jsonl")]:
                    for line in (self.store.get(key) or b"").decode().splitlines():
                        sample = json.loads(line) if line.strip() else None
                        if isinstance(sample, dict):
                            lines.append(sample)
            except Exception as error:
                self.say(f"could not read task {index}'s samples so far: {one_line(repr(error))[:200]}")
        return lines

    def _note(
        self, seq: int, what: str, results: list[dict[str, Any]], samples: list[dict[str, Any]]
    ) -> None:
        """Each task's facts of command `seq` kept for summary.json, and a note when the tasks began late or
        their spans differ by more than SPAN_SPREAD (one task slower, or starved: the level's load was not
        the whole for its whole length)."""
        measured = Counter(s.get("task") for s in samples if not s.get("warmup"))
        tasks = []
        for index, result in enumerate(results):
            facts: dict[str, Any] = {"task": index, "requests": measured.get(index, 0)}
            for name in ("late_s", "started_at", "ended_at"):
                value = result.get(name)
                facts[name] = (
                    value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
                )
            if facts["started_at"] is not None and facts["ended_at"] is not None:
                facts["span_s"] = round(facts["ended_at"] - facts["started_at"], 3)
            tasks.append(facts)
        self.facts.append({"command": seq, "what": what, "tasks": tasks})
        late = [f"task {t['task']} {t['late_s']:g} s" for t in tasks if (t["late_s"] or 0) > LATE_NOTE_S]
        if late:
            self.say(
                f"note: {what} began late on {', '.join(late)} (it polls every {self.timing.task_poll_s:g} s)"
            )
        spans = [t["span_s"] for t in tasks if t.get("span_s") is not None and t["requests"]]
        spread = max(spans) - min(spans) if len(spans) > 1 else 0.0
        if spread > SPAN_SPREAD_MIN_S and spread / max(spans) > SPAN_SPREAD:
            self.say(
                f"warning: {what}: the tasks' spans differ by more than {SPAN_SPREAD:.0%} ({min(spans):g} s to "
                f"{max(spans):g} s): part of it ran at less than its load (summary.json's in_vpc.commands)"
            )

    def run_level(self, level: Level, timeout_s: float) -> tuple[LevelStats, list[dict[str, Any]]]:
        """Level `level` on every task, from a start a few seconds ahead; the merged stats and all samples.
        `timeout_s`: one request's timeout (--timeout), which bounds how long the level may take."""
        seq = self._publish(level_command(level, time.time() + self.timing.start_delay_s))
        what = f"level {level.index}"
        within = (
            self.timing.start_delay_s + (level.requests + level.warmup + 1) * timeout_s + level.duration_s
        )
        results = self._collect(seq, what, within)
        merged = LevelStats()
        for index, result in enumerate(results):
            try:
                merged.merge(decode_stats(result["stats"]))
            except Exception as error:  # a forged or damaged stats.json: JSON, a missing key, HDR's decode
                raise self._malformed(stats_key(seq, index), error) from None
        samples = sorted(self.samples(seq), key=lambda s: (_number(s.get("time")), _number(s.get("task"))))
        self._note(seq, what, results, samples)
        return merged, samples

    def run_turn(self, within_s: float) -> list[dict[str, Any]]:
        """The turn command on every task; all their turns. `within_s`: how long the calls may take."""
        seq = self._publish(turn_command(time.time() + self.timing.start_delay_s))
        results = self._collect(seq, "the turns", self.timing.start_delay_s + within_s)
        samples = self.samples(seq)
        self._note(seq, "the turns", results, samples)
        return samples

    def finish(self) -> None:
        try:
            self._publish(DONE)
            self.done = True
        except Exception as error:  # the tasks are stopped anyway
            self.say(f"could not publish done: {one_line(str(error))}")

    def stop_tasks(self) -> None:
        """The run ended early: stop.json (each task stops between two requests, or at its next poll) and
        "done" at the next command, so that a task StopTask misses stops itself; never raises."""
        for key, body in ((STOP, {"kind": "stop"}), (command_key(self.seq), DONE)):
            try:
                put_json(self.store, key, body)
            except Exception as error:
                self.say(f"could not put {key}: {one_line(str(error))}")


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


# A task that began more than this late is noted; spans that differ by more than SPAN_SPREAD (and more than
# SPAN_SPREAD_MIN_S: a level of a second differs by a request's length between tasks) are warned of.
LATE_NOTE_S = 0.5
SPAN_SPREAD = 0.10
SPAN_SPREAD_MIN_S = 2.0
# Ctrl-C, SIGTERM (a `kill`, a CI job cancelled) and SIGHUP (the terminal closed): each stops the run.
RUN_SIGNALS = tuple(
    sig for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if sig is not None
)


@contextmanager
def stop_signals() -> Iterator[Callable[[], None]]:
    """One handler for Ctrl-C, SIGTERM and SIGHUP for a whole run: the first raises (KeyboardInterrupt for
    Ctrl-C, `Terminated` for the others), every later one is ignored, as is any after `hold()` (called when
    the tasks are being stopped), so that a second Ctrl-C cannot skip a StopTask. The previous handlers
    come back on exit, after the tasks are stopped. Only the main thread may set a handler."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    state = {"fired": False, "held": False}

    def handler(signum: int, frame: object) -> None:
        if state["fired"] or state["held"]:
            return
        state["fired"] = True
        if signum == signal.SIGINT:
            raise KeyboardInterrupt()
        raise Terminated(signum)

    def hold() -> None:
        state["held"] = True

    previous = {sig: signal.signal(sig, handler) for sig in RUN_SIGNALS}
    try:
        yield hold
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def stderr_say(text: str) -> None:
    print(f"in-vpc: {text}", file=sys.stderr, flush=True)


def run_schedule_in_vpc(conversation: InVpcRun, schedule: Any, sink: Any, timeout_s: float) -> None:
    """The levels of `schedule` (workers.Schedule) on the tasks, as workers.run_schedule runs them on local
    processes: each level's merged statistics go back to the schedule (a --slo search works alike), and
    the samples, all tasks', to the sink (RunOutput: samples.jsonl, summary.json) before the level is done."""
    from sonic_deploy.probe.workers import drive

    def run_one(level: Level) -> LevelStats:
        conversation.say(f"level {level.index}: {_load(level)} on {conversation.count} task(s)")
        stats, samples = conversation.run_level(level, timeout_s)
        for sample in samples:
            sink.record(sample)
        return stats

    drive(schedule, run_one, sink)


def _load(level: Level) -> str:
    return f"concurrency {level.concurrency}" if level.rate is None else f"rate {level.rate:g}/s"
