"""An `--in-vpc ENV` run's set-up from the environment's config and its stack, and the run itself (shared by
`probe ws|http|sagemaker` and `probe turn`); inside a task, the run's store."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sonic_deploy.in_vpc.arguments import LOCAL_OPTIONS, given, task_argv
from sonic_deploy.in_vpc.fleet import (
    Fleet,
    InVpcError,
    ProbeDeployment,
    choose_tasks,
    find_deployment,
    new_run_id,
    tasks_needed,
)
from sonic_deploy.in_vpc.options import InVpcOptions, InVpcTask
from sonic_deploy.in_vpc.protocol import (
    TRANSCRIPTS,
    DirectoryStore,
    ObjectStore,
    S3Store,
    open_store,
    run_prefix,
)
from sonic_deploy.in_vpc.runner import InVpcRun, Terminated, Timing, stderr_say, stop_signals

# Tests replace these: the runner's timings, and the AWS clients and the run's store.
TIMING = Timing()


def aws_clients(profile: str | None, region: str) -> tuple[Any, Any, Any]:
    """CloudFormation, ECS and S3 clients of the profile, in the stack's Region."""
    import boto3

    session = boto3.Session(profile_name=profile, region_name=region)
    return session.client("cloudformation"), session.client("ecs"), session.client("s3")


def run_store(s3: Any, bucket: str, run_id: str) -> ObjectStore:
    return S3Store(s3, bucket, run_prefix(run_id))


@dataclass
class Session:
    """One in-VPC run, set up: its stack, its tasks' command, and how it talks to them."""

    deployment: ProbeDeployment
    fleet: Fleet
    store: ObjectStore
    count: int
    command: Callable[[int], list[str]]
    timing: Timing
    say: Callable[[str], None] = field(default=stderr_say)
    # Each command's per-task facts (InVpcRun.facts), filled as the run goes: summary.json's
    # in_vpc.commands, since `describe()`'s dict is written at the end.
    facts: list[dict[str, Any]] = field(default_factory=list)
    conversation: InVpcRun | None = None
    # The options the stack's outputs gave (by dest), those the command line did not: the command uses them.
    filled: dict[str, str] = field(default_factory=dict)

    def partial(self) -> list[dict[str, Any]]:
        """After an interruption: what the tasks uploaded of the command under way (InVpcRun.partial)."""
        return [] if self.conversation is None else self.conversation.partial()

    def describe(self) -> dict[str, Any]:
        """Where the run measured from, for summary.json (its `client` is this machine, which only merged)."""
        d = self.deployment
        return {
            "environment": d.environment,
            "stack": d.stack_name,
            "region": d.region,
            "tasks": self.count,
            "run_id": self.fleet.run_id,
            "objects": self.store.where(),
            "commands": self.facts,
        }

    def run(self, work: Callable[[InVpcRun], None]) -> None:
        """Start the tasks, wait until they are ready, do `work` with them, tell them it is done; stop every
        task whatever happens. Ctrl-C, SIGTERM and SIGHUP, from the first RunTask to the last StopTask, go to
        one handler (`stop_signals`): the first propagates as KeyboardInterrupt once the tasks are stopped,
        any later one is ignored. A run that ends early puts stop.json first (a task that StopTask misses,
        or one whose RunTask answer was lost, stops itself), then StopTask, ListTasks twice."""
        from botocore.exceptions import BotoCoreError, ClientError

        from sonic_deploy.in_vpc.fleet import aws_failure

        conversation = InVpcRun(self.fleet, self.store, self.count, self.timing, self.say)
        conversation.facts = self.facts
        self.conversation = conversation
        reason = "sonic-deploy probe --in-vpc: run ended"
        with stop_signals() as hold:
            try:
                try:
                    conversation.start(self.command)
                    work(conversation)
                    conversation.finish()
                except (BotoCoreError, ClientError) as error:  # the bucket's (ECS's are InVpcError already)
                    raise aws_failure(f"the run's objects in {self.store.where()}", error) from None
            except BaseException as error:
                reason = f"sonic-deploy probe --in-vpc: {type(error).__name__}"
                raise
            finally:
                hold()
                if not conversation.done:
                    conversation.stop_tasks()
                self.fleet.stop_all(reason, 0.0 if conversation.done else self.timing.relist_after_s)
                self.say(f"the run's objects stay in {self.store.where()} (the bucket expires them)")


def prepare(
    options: InVpcOptions,
    transcripts: tuple[str, ...] | None,
    parser: argparse.ArgumentParser,
    argv: Sequence[str],
    prefix: Sequence[str],
    stack_routes: Sequence[str],
    load: tuple[int | None, float | None],
    defaults: Callable[[ProbeDeployment], dict[str, str]],
    load_label: str | None = None,
) -> Session:
    """The run's set-up: the environment's config, its stack (its outputs fill what `defaults` returns, for
    each option not given, in `Session.filled` and in the tasks' command), the task count, the tasks' command.
    `argv`: this command's own tokens after `prefix` (`probe ROUTE`), which begins each task's command;
    `transcripts`, the --transcripts the tasks read from the run's store; `stack_routes`, the routes whose
    stack may run it (those speaking the target's wire): the one the environment deploys."""
    from botocore.exceptions import BotoCoreError, ClientError

    from sonic_deploy.config import load_settings, require_config_dir
    from sonic_deploy.in_vpc.fleet import aws_failure

    environment = options.environment
    assert environment is not None, "prepare() is for --in-vpc ENV"
    require_config_dir(options.config_dir)
    settings = load_settings(options.config_dir, environment)
    config_file = str(options.config_dir / "environments" / f"{environment}.toml")
    routes = [str(route) for route in settings.environment.routes]
    stack_route = _stack_route(options, stack_routes, routes, config_file)
    probe = settings.environment.probe
    concurrency, rate = load
    needed = tasks_needed(concurrency, rate, probe.streams_per_task, probe.rate_per_task)
    described = load_label or (f"concurrency {concurrency}" if concurrency else f"rate {rate:g}/s")
    count = choose_tasks(
        needed, options.tasks, probe.max_tasks, described, config_file
    )  # before any AWS call
    region = settings.environment.region
    stack_name = settings.stack_name(stack_route)
    try:
        cloudformation, ecs, s3 = aws_clients(options.profile, region)
    except BotoCoreError as error:
        raise aws_failure(f"--profile {options.profile}", error) from None
    deployment = find_deployment(cloudformation, settings.environment_name, stack_route, stack_name)
    run_id = new_run_id(stack_route)
    store = run_store(s3, deployment.bucket, run_id)
    added: list[str] = []
    filled: dict[str, str] = {}
    for option, value in defaults(deployment).items():
        if not given(parser, argv, option):
            filled[option.removeprefix("--").replace("-", "_")] = value
            added += [option, value]
    drop = set(LOCAL_OPTIONS)
    if transcripts:
        try:
            store.put(TRANSCRIPTS, "".join(line + "\n" for line in transcripts).encode())
        except (BotoCoreError, ClientError) as error:
            raise aws_failure(f"s3:PutObject to {store.where()}", error) from None
        drop.add("--transcripts")

    def command(index: int) -> list[str]:
        hidden = ["--in-vpc-task", store.where(), "--task-index", str(index), "--task-count", str(count)]
        return [*prefix, *task_argv(parser, argv, drop, [*added, *hidden])]

    fleet = Fleet(ecs, deployment, run_id, stderr_say)
    stderr_say(
        f"{count} task(s) in {deployment.stack_name} ({region}), run {run_id}: needed {needed} for {described} "
        f"at [probe] streams_per_task {probe.streams_per_task}, rate_per_task {probe.rate_per_task:g}"
    )
    return Session(deployment, fleet, store, count, command, TIMING, filled=filled)


def task_store(task: InVpcTask) -> tuple[ObjectStore, tuple[str, ...] | None]:
    """Inside a task: the run's store (the task role's S3 access), and its transcripts if the runner put some."""
    store = open_store(task.store_url)
    body = store.get(TRANSCRIPTS)
    if body is None:
        return store, None
    return store, tuple(line for line in body.decode().splitlines() if line.strip())


__all__ = [
    "DirectoryStore",
    "InVpcError",
    "ObjectStore",
    "ProbeDeployment",
    "Session",
    "Terminated",
    "prepare",
    "task_store",
]


def _stack_route(
    options: InVpcOptions, candidates: Sequence[str], routes: list[str], config_file: str
) -> str:
    """The environment's one route among `candidates`, or the one --in-vpc-route names."""
    environment = options.environment
    if options.route is not None and options.route not in candidates:
        raise InVpcError(
            f"--in-vpc-route {options.route}: this probe's target is served by the {' or '.join(candidates)} "
            "route. Fix: name one of those, or leave --in-vpc-route out"
        )
    wanted = [options.route] if options.route is not None else list(candidates)
    deployed = [route for route in wanted if route in routes]
    if not deployed:
        raise InVpcError(
            f"--in-vpc {environment}: the environment does not deploy the {' or '.join(wanted)} route (routes = "
            f"{json.dumps(routes)} in {config_file}). Fix: probe the route it deploys, or another environment"
        )
    if len(deployed) > 1:
        raise InVpcError(
            f"--in-vpc {environment}: the environment deploys the {' and '.join(deployed)} routes, which both "
            f"serve this probe. Fix: add --in-vpc-route {deployed[0]} (or {deployed[1]})"
        )
    return deployed[0]
