"""The `sonic-deploy` command line: operator tools that never import aws_cdk."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from sonic_deploy import __version__
from sonic_deploy.interrupt import quiet_ctrl_c

INTERRUPTED = "sonic-deploy: interrupted"

with quiet_ctrl_c(INTERRUPTED):  # loading the commands takes a second: Ctrl-C then is not a traceback
    from sonic_deploy.arguments import OneLineParser, option_message
    from sonic_deploy.config import ConfigError
    from sonic_deploy.connect import command as connect_command
    from sonic_deploy.licence import command as licence_command
    from sonic_deploy.planner import command as plan_command
    from sonic_deploy.preflight import command as preflight_command
    from sonic_deploy.probe.cli import add_parser as add_probe_parser


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="sonic-deploy",
        description="Choose, check and operate a Cartesia Sonic deployment in your AWS account.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    plan_command.add_parser(subparsers)
    preflight_command.add_parser(subparsers)
    licence_command.add_parser(subparsers)
    connect_command.add_parser(subparsers)
    add_probe_parser(subparsers)
    return parser


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The arguments, checked alone (argparse's types) and together (each command's `check`), before any
    work: a mistake exits 2 with one line naming the option, the value and the fix."""
    args = build_parser().parse_args(argv)
    # The command line as given: `probe --in-vpc` passes it on to its tasks.
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return checked(args)


def checked(args: argparse.Namespace) -> argparse.Namespace:
    check = getattr(args, "check", None)
    if check is not None:
        try:
            problem = check(args)
        except ConfigError as error:
            problem = option_message(error)
        if problem is not None:
            args.command_parser.error(problem)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """A usage mistake, found by argparse or by a command's `check`, raises SystemExit(2) as argparse does; one
    found while running (a file that cannot be written) returns 2 with a line of the same form."""
    prog = "sonic-deploy"
    try:
        # Inside the try: argparse's types read files (a summary, transcripts), so Ctrl-C can come here.
        args = parse(argv)
        if getattr(args, "command_parser", None) is not None:
            prog = args.command_parser.prog
        return int(args.func(args))
    except ConfigError as error:
        print(f"{prog}: {option_message(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
