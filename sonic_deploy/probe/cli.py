"""`sonic-deploy probe ws|http|sagemaker|serve|compare|turn`: each subcommand's module wired in."""

from __future__ import annotations

from typing import Any

from sonic_deploy.probe.commands import compare, http, sagemaker, serve, ws
from sonic_deploy.turn.arguments import add_turn_parser


def add_parser(subparsers: Any) -> None:
    probe = subparsers.add_parser("probe", help="measure time to first audio under load (either route)")
    routes = probe.add_subparsers(dest="probe_command", metavar="TARGET", required=True)
    ws.add_parser(routes)
    http.add_parser(routes)
    sagemaker.add_parser(routes)
    serve.add_parser(routes)
    add_turn_parser(routes)
    compare.add_parser(routes)
