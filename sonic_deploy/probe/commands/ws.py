"""`sonic-deploy probe ws`: the Cartesia WebSocket API (the ECS route), whole transcripts or an agent's turns."""

from __future__ import annotations

import argparse
from typing import Any

from sonic_deploy.arguments import whole
from sonic_deploy.client.cartesia_api import DEFAULT_BUFFER_DELAY_MS, MAX_BUFFER_DELAY_MS
from sonic_deploy.config.errors import one_line
from sonic_deploy.probe.arguments import HELP, MS, SECONDS_OR_ZERO, add_run_options, cartesia_options
from sonic_deploy.probe.requests import SPLITS


def _buffer_delay(text: str) -> int | str:
    if text == "default":
        return text
    if not (text.isascii() and text.isdigit()) or int(text) > MAX_BUFFER_DELAY_MS:
        raise argparse.ArgumentTypeError(
            f"{one_line(repr(text))}: not whole milliseconds 0-{MAX_BUFFER_DELAY_MS} (the API's range). Fix: give "
            f"0 to {MAX_BUFFER_DELAY_MS}, or default"
        )
    return int(text)


def add_parser(routes: Any) -> None:
    ws = routes.add_parser("ws", formatter_class=HELP, help="Cartesia WebSocket API (ECS route)")
    cartesia_options(ws, "/tts/websocket")
    ws.add_argument(
        "--multiplex",
        type=whole(1, 1024, "contexts per socket"),
        default=1,
        help="contexts per socket (default: one socket each)",
    )
    agent = ws.add_argument_group(
        "agent-like traffic",
        "--agent sends each transcript as a voice agent does: pieces with continue: true at an LLM's pace "
        "on one long-lived socket per call, reused turn after turn, then an empty continue: false",
    )
    agent.add_argument("--agent", action="store_true", help="send turns as an agent does (see above)")
    agent.add_argument("--split", choices=SPLITS, help="a piece is a sentence or a word (default: sentence)")
    agent.add_argument(
        "--piece-interval-ms", type=MS, help="pause between pieces, the LLM's pace (default: 100)"
    )
    agent.add_argument(
        "--max-buffer-delay-ms",
        type=_buffer_delay,
        metavar=f"0-{MAX_BUFFER_DELAY_MS}|default",
        help="sent on every piece (default: 0, as the frameworks send); 'default' leaves it out, and the "
        f"API then waits up to {DEFAULT_BUFFER_DELAY_MS} ms for more text",
    )
    agent.add_argument(
        "--no-timestamps", action="store_const", const=True, help="do not ask for word timestamps"
    )
    agent.add_argument(
        "--idle-reconnect-s",
        type=SECONDS_OR_ZERO,
        help="a call's socket idle for longer is replaced before its next turn (default: 300)",
    )
    add_run_options(ws)
