"""`--in-vpc ENV` and the hidden task options on the command line: the options, what they refuse together,
and a run's set-up from the environment's config and its stack (shared by `probe ws|http|sagemaker` and
`probe turn`)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sonic_deploy.arguments import ENVIRONMENT, config_folder, name, whole
from sonic_deploy.probe.in_vpc.protocol import (
    TRANSCRIPTS,
    DirectoryStore,
    ObjectStore,
    S3Store,
    open_store,
    run_prefix,
)
from sonic_deploy.probe.in_vpc.runner import (
    Fleet,
    InVpcError,
    InVpcRun,
    ProbeDeployment,
    Terminated,
    Timing,
    choose_tasks,
    find_deployment,
    given,
    new_run_id,
    stderr_say,
    stop_signals,
    task_argv,
    tasks_needed,
)

_STORE_URL = name(
    r"(s3://[a-z0-9.-]{3,63}|file://)/[!-~]{1,1000}", "an s3:// or file:// URL", "s3://BUCKET/runs/RUN"
)
# Options of this machine: never sent to a task. --budget: the turn's budget is judged here, on the merged
# turns (its file need not be in the image).
LOCAL_OPTIONS = {
    "--budget",
    "--in-vpc",
    "--tasks",
    "--config-dir",
    "--profile",
    "--out",
    "--api-key",
    "--publish-metrics",
}

# Tests replace these: the runner's timings, and the AWS clients and the run's store.
TIMING = Timing()


def aws_clients(profile: str | None, region: str) -> tuple[Any, Any, Any]:
    """CloudFormation, ECS and S3 clients of the profile, in the stack's Region."""
    import boto3

    session = boto3.Session(profile_name=profile, region_name=region)
    return session.client("cloudformation"), session.client("ecs"), session.client("s3")


def run_store(s3: Any, bucket: str, run_id: str) -> ObjectStore:
    return S3Store(s3, bucket, run_prefix(run_id))


def add_options(parser: argparse.ArgumentParser, example_load: str) -> None:
    group = parser.add_argument_group(
        "from inside the VPC",
        "--in-vpc ENV runs this probe on Fargate tasks in the stack's VPC (the callers' network path), started "
        "with ECS RunTask and stopped when the run ends; outputs are written here (see docs/probe.md)",
    )
    group.add_argument(
        "--in-vpc", type=ENVIRONMENT, metavar="ENV", help="the deployed environment to probe from"
    )
    group.add_argument(
        "--tasks",
        type=whole(1, 100, "Fargate tasks"),
        metavar="N",
        help=f"tasks to start; unset: from the load and [probe] in the config, e.g. {example_load}",
    )
    group.add_argument(
        "--config-dir", type=config_folder, default=Path("config"), help="the config/ folder (--in-vpc)"
    )
    group.add_argument("--profile", help="AWS profile for --in-vpc; unset: the usual credential chain")
    # Inside a task: where the run's objects are, and which task this is (the runner sets them).
    group.add_argument("--in-vpc-task", type=_STORE_URL, help=argparse.SUPPRESS)
    group.add_argument("--task-index", type=whole(0, 99, "a task index"), help=argparse.SUPPRESS)
    group.add_argument("--task-count", type=whole(1, 100, "a task count"), help=argparse.SUPPRESS)


def check(args: argparse.Namespace) -> str | None:
    """What the in-VPC options refuse together (None: nothing)."""
    if args.in_vpc_task is not None or args.task_index is not None or args.task_count is not None:
        if None in (args.in_vpc_task, args.task_index, args.task_count):
            return "--in-vpc-task, --task-index and --task-count go together (the runner sets them). Fix: give all three"
        if args.task_index >= args.task_count:
            return f"--task-index {args.task_index} is not below --task-count {args.task_count}. Fix: 0 to {args.task_count - 1}"
        if args.in_vpc is not None:
            return "--in-vpc starts tasks; --in-vpc-task is one of them. Fix: drop --in-vpc-task"
        return None
    if args.in_vpc is None:
        for option in ("tasks", "profile"):
            if getattr(args, option) is not None:
                return f"--{option} is for --in-vpc ENV. Fix: add --in-vpc ENV, or drop --{option}"
        return None
    if getattr(args, "api_key", None) is not None:
        return (
            "--api-key is not sent to the tasks: in the VPC they read CARTESIA_API_KEY from Secrets Manager. "
            "Fix: drop --api-key"
        )
    if getattr(args, "ca_bundle", None) is not None:
        return (
            "--ca-bundle names a file on this machine, which a task cannot read. Fix: drop --ca-bundle (a task "
            "trusts the CAs in its image)"
        )
    if getattr(args, "workers", 1) != 1:
        return "--workers splits a run on this machine; in the VPC each task is a worker. Fix: drop --workers (size with --tasks)"
    if getattr(args, "wav", None):
        return "--wav names files on this machine, which a task cannot read. Fix: drop --wav (use --audio)"
    return None


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

        from sonic_deploy.probe.in_vpc.runner import _aws_failure

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
                    raise _aws_failure(f"the run's objects in {self.store.where()}", error) from None
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
    args: argparse.Namespace,
    parser: argparse.ArgumentParser,
    argv: Sequence[str],
    prefix: Sequence[str],
    stack_route: str,
    load: tuple[int | None, float | None],
    defaults: Callable[[ProbeDeployment], dict[str, str]],
    load_label: str | None = None,
) -> Session:
    """The run's set-up: the environment's config, its stack (its outputs fill what `defaults` returns, for
    each option not given, on `args` and in the tasks' command), the task count, the tasks' command.
    `argv`: this command's own tokens after `prefix` (`probe ROUTE`), which begins each task's command."""
    from botocore.exceptions import BotoCoreError, ClientError

    from sonic_deploy.config import load_settings, require_config_dir
    from sonic_deploy.probe.in_vpc.runner import _aws_failure

    require_config_dir(args.config_dir)
    settings = load_settings(args.config_dir, args.in_vpc)
    config_file = str(args.config_dir / "environments" / f"{args.in_vpc}.toml")
    routes = [str(route) for route in settings.environment.routes]
    if stack_route not in routes:
        raise InVpcError(
            f"--in-vpc {args.in_vpc}: the environment does not deploy the {stack_route} route (routes = "
            f"{json.dumps(routes)} in {config_file}). Fix: probe the route it deploys, or another environment"
        )
    probe = settings.environment.probe
    concurrency, rate = load
    needed = tasks_needed(concurrency, rate, probe.streams_per_task, probe.rate_per_task)
    described = load_label or (f"concurrency {concurrency}" if concurrency else f"rate {rate:g}/s")
    count = choose_tasks(needed, args.tasks, probe.max_tasks, described, config_file)  # before any AWS call
    region = settings.environment.region
    stack_name = settings.stack_name(stack_route)
    try:
        cloudformation, ecs, s3 = aws_clients(args.profile, region)
    except BotoCoreError as error:
        raise _aws_failure(f"--profile {args.profile}", error) from None
    deployment = find_deployment(cloudformation, settings.environment_name, stack_route, stack_name)
    run_id = new_run_id(stack_route)
    store = run_store(s3, deployment.bucket, run_id)
    added: list[str] = []
    for option, value in defaults(deployment).items():
        if not given(parser, argv, option):
            setattr(args, option.removeprefix("--").replace("-", "_"), value)
            added += [option, value]
    drop = set(LOCAL_OPTIONS)
    if getattr(args, "transcripts", None):
        try:
            store.put(TRANSCRIPTS, "".join(line + "\n" for line in args.transcripts).encode())
        except (BotoCoreError, ClientError) as error:
            raise _aws_failure(f"s3:PutObject to {store.where()}", error) from None
        drop.add("--transcripts")

    def command(index: int) -> list[str]:
        hidden = ["--in-vpc-task", store.where(), "--task-index", str(index), "--task-count", str(count)]
        return [*prefix, *task_argv(parser, argv, drop, [*added, *hidden])]

    fleet = Fleet(ecs, deployment, run_id, stderr_say)
    stderr_say(
        f"{count} task(s) in {deployment.stack_name} ({region}), run {run_id}: needed {needed} for {described} "
        f"at [probe] streams_per_task {probe.streams_per_task}, rate_per_task {probe.rate_per_task:g}"
    )
    return Session(deployment, fleet, store, count, command, TIMING)


def task_store(args: argparse.Namespace) -> ObjectStore:
    """Inside a task: the run's store (the task role's S3 access), and its transcripts if the runner put some."""
    store = open_store(args.in_vpc_task)
    body = store.get(TRANSCRIPTS)
    if body is not None:
        args.transcripts = tuple(line for line in body.decode().splitlines() if line.strip())
    return store


__all__ = [
    "DirectoryStore",
    "InVpcError",
    "ObjectStore",
    "ProbeDeployment",
    "Session",
    "Terminated",
    "add_options",
    "check",
    "prepare",
    "task_store",
]
