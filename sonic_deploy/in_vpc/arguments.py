"""`--in-vpc ENV` and the hidden task options on the command line (shared by `probe ws|http|sagemaker` and
`probe turn`): the options, what they refuse together, their typed form, and a task's own command line made
from this one's."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from sonic_deploy.arguments import ENVIRONMENT, config_folder, name, whole
from sonic_deploy.in_vpc.options import InVpcOptions, InVpcTask
from sonic_deploy.routes import ROUTES

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
    "--publish-route",
    "--in-vpc-route",
}


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
    group.add_argument(
        "--in-vpc-route",
        choices=tuple(ROUTES),
        metavar="ROUTE",
        help="the route whose stack to probe from, when ENV deploys two that speak this wire (ecs and eks); "
        "unset: the one it deploys",
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
        for option in ("tasks", "profile", "in_vpc_route"):
            if getattr(args, option) is not None:
                flag = "--" + option.replace("_", "-")
                return f"{flag} is for --in-vpc ENV. Fix: add --in-vpc ENV, or drop {flag}"
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


def options(args: argparse.Namespace) -> InVpcOptions:
    """The in-VPC options of a checked command line (`check` holds the three hidden ones together)."""
    task = None
    if args.in_vpc_task is not None:
        task = InVpcTask(args.in_vpc_task, args.task_index, args.task_count)
    return InVpcOptions(args.in_vpc, args.tasks, args.config_dir, args.profile, task, args.in_vpc_route)


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
