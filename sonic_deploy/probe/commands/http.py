"""`sonic-deploy probe http`: streamed bytes over HTTP (`POST /tts/bytes`)."""

from __future__ import annotations

from typing import Any

from sonic_deploy.probe.arguments import HELP, add_run_options, cartesia_options


def add_parser(routes: Any) -> None:
    http = routes.add_parser("http", formatter_class=HELP, help="streamed bytes over HTTP (POST /tts/bytes)")
    cartesia_options(http, "/tts/bytes")
    add_run_options(http)
