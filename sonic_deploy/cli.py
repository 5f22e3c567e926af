"""The `sonic-deploy` command line: operator tools that never import aws_cdk."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from sonic_deploy import __version__
from sonic_deploy.interrupt import quiet_ctrl_c

INTERRUPTED = "sonic-deploy: interrupted"

with quiet_ctrl_c(INTERRUPTED):
    from sonic_deploy.arguments import OneLineParser, option_message
    from sonic_deploy.config import ConfigError

# Each command's module, loaded only when it runs (or for the whole --help): `make deploy` runs `preflight` and
# `make licence` runs `licence` on the synth-only install, where the probe's packages (hdrh, pybase64) are not.
COMMANDS = {
    "plan": "sonic_deploy.planner.command",
    "preflight": "sonic_deploy.preflight.command",
    "licence": "sonic_deploy.licence.command",
    "connect": "sonic_deploy.connect.command",
    "mirror": "sonic_deploy.mirror.command",
    "probe": "sonic_deploy.probe.cli",
}


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser of the command `argv` names (argv[0]), or of every command when it names none."""
    parser = OneLineParser(
        prog="sonic-deploy",
        description="Choose, check and operate a Cartesia Sonic deployment in your AWS account.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    named = [argv[0]] if argv and argv[0] in COMMANDS else list(COMMANDS)
    with quiet_ctrl_c(INTERRUPTED):  # loading a command takes up to a second: Ctrl-C then is not a traceback
        for name in named:
            importlib.import_module(COMMANDS[name]).add_parser(subparsers)
    return parser


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The arguments, checked alone (argparse's types) and together (each command's `check`), before any
    work: a mistake exits 2 with one line naming the option, the value and the fix."""
    given = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(given).parse_args(given)
    # The command line as given: `probe --in-vpc` passes it on to its tasks.
    args.argv = given
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
