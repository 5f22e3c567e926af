"""The `sonic-deploy` command line: operator tools that never import aws_cdk."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from sonic_deploy import __version__
from sonic_deploy.config import ConfigError
from sonic_deploy.connect import command as connect_command
from sonic_deploy.licence import command as licence_command
from sonic_deploy.planner import command as plan_command
from sonic_deploy.preflight import command as preflight_command
from sonic_deploy.probe.cli import add_parser as add_probe_parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ConfigError as error:
        print(f"sonic-deploy: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
