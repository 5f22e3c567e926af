"""`sonic-deploy probe serve`: the stand-ins (sonic_deploy/standins/) on one local server; its options, typed
at the edge as the stand-ins' `ServerConfig`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import ssl
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sonic_deploy.arguments import MAX_CONCURRENCY, MAX_MS, MAX_REQUESTS, input_file, name, real, whole
from sonic_deploy.config.errors import one_line
from sonic_deploy.probe.arguments import API_KEY, HELP, MS, SECONDS, SEED, missing_extra

if TYPE_CHECKING:
    from sonic_deploy.standins.reference_stream import ServerConfig

_TOKENS_PER_S = real(0, 100_000, "tokens a second", low_open=True)


# A name or an address to listen on: a newline or a space in it is a typo, not a host.
_HOST = name(r"[A-Za-z0-9_.:\[\]%-]{1,253}", "a host name or IP address", "127.0.0.1 or 0.0.0.0")


def _fault(text: str) -> tuple[str, int]:
    """`KIND:EVERY` (EVERY defaults to 1), with KIND one the reference server injects."""
    from sonic_deploy.standins.reference_stream import FAULTS

    kind, _, every = text.partition(":")
    if kind not in FAULTS:
        raise argparse.ArgumentTypeError(
            f"unknown fault {one_line(repr(kind))} in {one_line(repr(text))}. Fix: use one of {', '.join(FAULTS)}"
        )
    if every and not (every.isascii() and every.isdigit() and 0 < int(every) <= MAX_REQUESTS):
        raise argparse.ArgumentTypeError(
            f"{one_line(repr(text))}: EVERY must be a whole number from 1 to {MAX_REQUESTS} (every N-th stream). "
            f"Fix: e.g. {kind}:10"
        )
    return kind, int(every or 1)


def add_parser(routes: Any) -> None:
    serve = routes.add_parser(
        "serve", formatter_class=HELP, help="a local reference server (measures the probe, not Sonic)"
    )
    serve.add_argument("--host", type=_HOST, default="127.0.0.1")
    serve.add_argument("--port", type=whole(0, 65535, "a TCP port"), default=8080, help="0 picks a free port")
    serve.add_argument("--first-byte-ms", type=MS, default=90.0)
    serve.add_argument("--jitter-ms", type=MS, default=0.0, help="uniform extra first-byte delay 0..J")
    serve.add_argument(
        "--chunk-ms", type=whole(1, 10_000, "milliseconds of audio"), default=20, help="audio per chunk"
    )
    serve.add_argument(
        "--pace", type=real(0, 100, "a pace"), default=0.5, help="chunk interval / chunk audio (0 = flat out)"
    )
    serve.add_argument(
        "--audio-ms",
        type=whole(1, int(MAX_MS), "milliseconds of audio"),
        help="audio per piece of text; a whole request is one (default: --ms-per-char x length)",
    )
    serve.add_argument("--ms-per-char", type=real(0, 10_000, "milliseconds", low_open=True), default=60.0)
    serve.add_argument("--leading-silence-ms", type=whole(0, int(MAX_MS), "milliseconds"), default=0)
    serve.add_argument(
        "--capacity",
        type=whole(0, MAX_CONCURRENCY, "concurrent streams"),
        help="429 beyond this many concurrent streams (0: every stream)",
    )
    serve.add_argument(
        "--fault",
        action="append",
        type=_fault,
        default=[],
        metavar="KIND:EVERY",
        help="every N-th stream gets KIND: reset, stall, malformed, error, stream_error, "
        "status500, status422 (repeatable)",
    )
    serve.add_argument("--stall-ms", type=MS, default=2000.0)
    serve.add_argument(
        "--parts",
        choices=("aligned", "split", "packed", "mixed"),
        default="aligned",
        help="how SageMaker PayloadParts cut the JSON lines",
    )
    serve.add_argument(
        "--api-key",
        type=API_KEY,
        help="require this key (as X-API-Key, Authorization: Bearer or ?api_key=)",
    )
    serve.add_argument(
        "--llm-first-token-ms",
        type=MS,
        default=400.0,
        help="the LLM stand-in (POST /v1/chat/completions): first token this long after the request",
    )
    serve.add_argument(
        "--llm-tokens-per-s",
        type=_TOKENS_PER_S,
        default=50.0,
        help="the LLM stand-in: tokens a second after the first",
    )
    serve.add_argument(
        "--stt-final-ms",
        type=MS,
        default=300.0,
        help="the speech-to-text stand-ins (Ink, Transcribe): the final transcript this long after speech ends",
    )
    serve.add_argument(
        "--stt-transcript",
        help="the speech-to-text stand-ins: every turn's transcript (default: a fixed one)",
    )
    serve.add_argument("--seed", type=SEED, default=1)
    serve.add_argument("--exit-after", type=SECONDS, help="stop by itself after this many seconds")
    serve.add_argument(
        "--tls-cert",
        type=input_file("a PEM certificate chain"),
        metavar="FILE",
        help="serve https:// and wss:// with this certificate chain (PEM; with --tls-key)",
    )
    serve.add_argument(
        "--tls-key",
        type=input_file("a PEM private key"),
        metavar="FILE",
        help="the certificate's private key (PEM, unencrypted)",
    )
    serve.add_argument(
        "--unnamed-refusals",
        action="store_true",
        help="a WebSocket context refused for capacity gets a 429 naming no context_id, and another for each "
        "further piece sent for it (how a client copes with a server that does not say whose error it is)",
    )
    serve.add_argument(
        "--control",
        action="store_true",
        help='also serve POST /control {"options": [...]}: from then on, do what these options say, from zero '
        "counts (for test harnesses: one server for many tests; not --host, --port, --exit-after or TLS)",
    )
    serve.set_defaults(func=run, check=check, command_parser=serve, serve_parser=serve)


def check(args: argparse.Namespace) -> str | None:
    if (args.tls_cert is None) != (args.tls_key is None):
        given, missing = ("--tls-cert", "--tls-key") if args.tls_key is None else ("--tls-key", "--tls-cert")
        return (
            f"{given} without {missing}: TLS needs both the certificate chain and its private key (PEM). "
            "Fix: give both, or neither for plain http:// and ws://"
        )
    return None


# What only a new process can change: the address, its deadline, TLS, and control itself.
_PROCESS_OPTIONS = ("--host", "--port", "--exit-after", "--tls-cert", "--tls-key", "--control")


def _config(args: argparse.Namespace) -> ServerConfig:
    from sonic_deploy.standins.reference_stream import ServerConfig

    return ServerConfig(
        host=args.host,
        port=args.port,
        first_byte_ms=args.first_byte_ms,
        jitter_ms=args.jitter_ms,
        chunk_ms=args.chunk_ms,
        pace=args.pace,
        audio_ms=args.audio_ms,
        ms_per_char=args.ms_per_char,
        leading_silence_ms=args.leading_silence_ms,
        capacity=args.capacity,
        faults=dict(args.fault),
        stall_ms=args.stall_ms,
        parts=args.parts,
        api_key=args.api_key,
        unnamed_refusals=args.unnamed_refusals,
        seed=args.seed,
        exit_after_s=args.exit_after,
        tls_cert=None if args.tls_cert is None else str(args.tls_cert),
        tls_key=None if args.tls_key is None else str(args.tls_key),
        llm_first_token_ms=args.llm_first_token_ms,
        llm_tokens_per_s=args.llm_tokens_per_s,
        stt_final_ms=args.stt_final_ms,
        stt_transcript=args.stt_transcript,
    )


def _control(parser: argparse.ArgumentParser, started: ServerConfig) -> Callable[[list[str]], ServerConfig]:
    """`POST /control`'s options as a config, parsed as on the command line; a ValueError names the bad one."""

    def config(options: list[str]) -> ServerConfig:
        fixed = [name for name in (option.split("=", 1)[0] for option in options) if name in _PROCESS_OPTIONS]
        if fixed:
            raise ValueError(f"{fixed[0]}: only a new process can change it. Fix: start another probe serve")
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                args = parser.parse_args(options)
        except SystemExit:
            raise ValueError(said.getvalue().strip()) from None
        new = _config(args)
        return replace(new, host=started.host, port=started.port, exit_after_s=started.exit_after_s)

    return config


def run(args: argparse.Namespace) -> int:
    try:
        from sonic_deploy.standins.server import serve, tls_context
    except ImportError as error:
        return missing_extra(error)

    parser: argparse.ArgumentParser = args.serve_parser
    config = _config(args)
    try:
        tls_context(config)  # loaded again by the server: a bad file is an error here, not a traceback there
    except (OSError, ssl.SSLError) as error:
        parser.error(
            f"--tls-cert {args.tls_cert} --tls-key {args.tls_key}: cannot load them ({error}). Fix: give a PEM "
            "certificate chain and its unencrypted private key"
        )
    from sonic_deploy.event_loop import precise_loop, steady_collector

    # The standard loop on a selector whose timers fire when due (uvloop's, like epoll's, have millisecond
    # steps, and uvloop's cached clock can fire a delay early): the server's delays are the reference.
    try:
        with steady_collector(), asyncio.Runner(loop_factory=precise_loop) as runner:
            runner.run(serve(config, _control(parser, config) if args.control else None))
    except OSError as error:  # the address is taken, not this host's, or not a host at all
        parser.error(
            f"cannot serve on --host {one_line(repr(args.host))} --port {args.port}: {error.strerror or error}. "
            "Fix: another --port (0 picks a free one), or a --host of this machine (127.0.0.1, 0.0.0.0)"
        )
    return 0
