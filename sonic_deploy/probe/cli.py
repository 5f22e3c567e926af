"""`sonic-deploy probe ws|http|sagemaker|serve|compare|turn`."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import math
import os
import ssl
import sys
from pathlib import Path
from typing import Any

from sonic_deploy.arguments import (
    ENDPOINT_NAME,
    ENVIRONMENT,
    HEADER_VALUE,
    IDENTIFIER,
    MAX_CONCURRENCY,
    MAX_MS,
    MAX_RATE,
    MAX_REQUESTS,
    MAX_SECONDS,
    REGION_NAME,
    input_file,
    listed,
    name,
    output_file,
    output_folder,
    real,
    secret,
    url,
    whole,
)
from sonic_deploy.audio import ENCODINGS, SAMPLE_RATES, AudioFormat
from sonic_deploy.client.cartesia_api import DEFAULT_BUFFER_DELAY_MS, MAX_BUFFER_DELAY_MS
from sonic_deploy.client.trust import ca_bundle_argument
from sonic_deploy.config.errors import one_line
from sonic_deploy.in_vpc import arguments as in_vpc_arguments
from sonic_deploy.in_vpc import session as in_vpc
from sonic_deploy.probe.canary_metrics import NAMESPACE
from sonic_deploy.probe.capacity_search import DEFAULT_MAXIMUM, DEFAULT_START
from sonic_deploy.probe.requests import (
    DEFAULT_CARTESIA_VERSION,
    DEFAULT_MODEL_ID,
    DEFAULT_VOICE_ID,
    PRESETS,
    SPLITS,
    AgentTraffic,
    RequestTemplate,
    load_transcripts,
)
from sonic_deploy.probe.slo import EXAMPLE, Slo, SloError, parse_slo
from sonic_deploy.probe.summary_file import SAMPLES, SUMMARY, read_run
from sonic_deploy.turn.arguments import add_turn_parser

_HELP = argparse.ArgumentDefaultsHelpFormatter


# What the probe sends and how hard: each bounded (sonic_deploy/arguments.py says why).
_LEVELS = listed(whole(1, MAX_CONCURRENCY, "concurrent streams"), "concurrency levels")
_RATES = listed(real(0, MAX_RATE, "requests a second", low_open=True), "request rates")
_REQUESTS = whole(1, MAX_REQUESTS, "requests")
_WARMUP = whole(0, MAX_REQUESTS, "uncounted requests")
_SECONDS = real(0, MAX_SECONDS, "seconds", low_open=True)
_SECONDS_OR_ZERO = real(0, MAX_SECONDS, "seconds")
_SEED = whole(-(2**63), 2**63 - 1, "a seed")
_MS = real(0, MAX_MS, "milliseconds")
_TOKENS_PER_S = real(0, 100_000, "tokens a second", low_open=True)


def _ramp_up(text: str) -> float | None:
    if text == "auto":
        return None
    try:
        return _SECONDS_OR_ZERO(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"{one_line(repr(text))}: not seconds. Fix: give seconds >= 0, or auto"
        ) from None


_TRANSCRIPTS_FILE = input_file("a UTF-8 file of transcripts, one per line")


def _transcript_file(text: str) -> tuple[str, ...]:
    """The transcripts of a readable text file (read once, here), or an argparse error naming it."""
    path = _TRANSCRIPTS_FILE(text)
    try:
        return load_transcripts(None, path)
    except (OSError, ValueError) as error:
        raise argparse.ArgumentTypeError(
            f"{one_line(repr(text))}: {one_line(str(error))}. Fix: give a UTF-8 file of transcripts, one per line"
        ) from None


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


def _buffer_delay(text: str) -> int | str:
    if text == "default":
        return text
    if not (text.isascii() and text.isdigit()) or int(text) > MAX_BUFFER_DELAY_MS:
        raise argparse.ArgumentTypeError(
            f"{one_line(repr(text))}: not whole milliseconds 0-{MAX_BUFFER_DELAY_MS} (the API's range). Fix: give "
            f"0 to {MAX_BUFFER_DELAY_MS}, or default"
        )
    return int(text)


def _load_options(parser: argparse.ArgumentParser) -> None:
    request = parser.add_argument_group("request")
    request.add_argument("--transcript", help="text to speak (default: a short sentence)")
    request.add_argument(
        "--transcripts", type=_transcript_file, metavar="FILE", help="file of transcripts, one per line"
    )
    request.add_argument("--voice-id", type=IDENTIFIER, default=DEFAULT_VOICE_ID)
    request.add_argument(
        "--model-id", type=IDENTIFIER, default=DEFAULT_MODEL_ID, help="model_id for the Cartesia API"
    )
    request.add_argument("--language", default="en")
    request.add_argument("--preset", choices=sorted(PRESETS), help="telephony = 8 kHz mu-law")
    request.add_argument("--encoding", choices=ENCODINGS, help="default pcm_s16le")
    request.add_argument("--sample-rate", type=int, choices=SAMPLE_RATES, help="default 44100")
    load = parser.add_argument_group("load")
    load.add_argument("--concurrency", type=_LEVELS, default=[1, 2, 4, 8, 16], help="closed-loop levels")
    load.add_argument(
        "--requests", type=_REQUESTS, default=50, help="measured requests per closed-loop level"
    )
    load.add_argument(
        "--warmup", type=_WARMUP, help="uncounted requests before each level (default: concurrency)"
    )
    load.add_argument(
        "--ramp-up",
        type=_ramp_up,
        default=None,
        metavar="SECONDS|auto",
        help="closed loop: spread the slots' starts over this many seconds; auto = over one warm-up "
        "request's duration, timed alone first; 0 = all at once, in lock-step (default: auto)",
    )
    load.add_argument(
        "--error-backoff-ms",
        type=real(0, MAX_MS, "milliseconds"),
        default=100.0,
        help="closed loop: pause of a slot after a failed request",
    )
    load.add_argument("--rate", type=_RATES, help="open loop instead: requests/s, comma-separated levels")
    load.add_argument("--duration", type=_SECONDS, default=30.0, help="seconds per open-loop level")
    load.add_argument("--arrivals", choices=("poisson", "constant"), default="poisson")
    load.add_argument(
        "--workers",
        type=whole(1, 256, "client processes"),
        default=1,
        help="client processes (histograms merge exactly)",
    )
    load.add_argument(
        "--max-in-flight",
        type=whole(1, 100_000, "requests in flight"),
        default=1024,
        help="open-loop cap on requests in flight",
    )
    measure = parser.add_argument_group("measurement and output")
    measure.add_argument(
        "--timeout",
        type=real(0, 3600, "seconds", low_open=True),
        default=30.0,
        help="seconds per request, end to end",
    )
    measure.add_argument(
        "--audible-threshold-db",
        type=real(-200, 0, "a level in dBFS, at most 0 (full scale)"),
        default=-40.0,
        help="first audible audio: first sample at or above this dBFS",
    )
    measure.add_argument(
        "--playback-delay-ms",
        type=real(0, MAX_MS, "milliseconds"),
        default=0.0,
        help="player buffer before playback starts (underrun simulation)",
    )
    measure.add_argument(
        "--out", type=output_folder("the run"), help="output folder (default: a new timestamped folder)"
    )
    measure.add_argument("--no-report", action="store_true", help="skip report.png")
    measure.add_argument("--quiet", action="store_true", help="no live progress line")
    measure.add_argument("--seed", type=_SEED, default=1)


def _slo(text: str) -> Slo:
    try:
        return parse_slo(text)
    except SloError as error:
        raise argparse.ArgumentTypeError(one_line(str(error))) from None


_streams = whole(1, MAX_CONCURRENCY, "concurrent streams")


def _slo_options(parser: argparse.ArgumentParser) -> None:
    search = parser.add_argument_group("capacity search (closed loop, instead of the --concurrency sweep)")
    search.add_argument(
        "--slo",
        type=_slo,
        metavar="SPEC",
        help=f"find the highest concurrency whose level meets SPEC, e.g. {EXAMPLE.replace('%', '%%')}: terms "
        "MEASURE_PCT<=VALUE[ms|s] (ttfa, ttfa_audible, service_ttfa, total, max_gap; p50, p90, p95, p99, max) "
        "and errors<=X%%; doubles from --slo-start until a level fails, then bisects",
    )
    search.add_argument(
        "--slo-start", type=_streams, default=DEFAULT_START, metavar="STREAMS", help="first concurrency tried"
    )
    search.add_argument(
        "--slo-max",
        type=_streams,
        default=DEFAULT_MAXIMUM,
        metavar="STREAMS",
        help="highest concurrency tried",
    )
    search.add_argument(
        "--slo-resolution",
        type=_streams,
        metavar="STREAMS",
        help="stop bisecting once the failing level is at most this many streams above the passing one "
        "(unset: 5%% of the passing level, at least 1)",
    )
    # The search chooses the concurrency: a --concurrency given with it (not this default) is refused.
    parser.set_defaults(default_concurrency=parser.get_default("concurrency"))


def _run_folder(text: str) -> Path:
    """A probe run's folder, or its summary.json: the folder (where compare reads summary.json)."""
    path = Path(text)
    if path.name == SUMMARY and path.is_file():
        return path.parent
    if not path.is_dir():
        problem = "no such run" if not path.exists() else "not a run's folder or its summary.json"
        raise argparse.ArgumentTypeError(
            f"{one_line(repr(text))}: {problem}. Fix: give the folder a probe run wrote (its --out)"
        )
    if not (path / SUMMARY).is_file():
        raise argparse.ArgumentTypeError(
            f"{one_line(repr(text))}: no {SUMMARY} in it. Fix: give the folder a probe run wrote (its --out)"
        )
    return path


_API_KEY = secret("--api-key", "CARTESIA_API_KEY")


# A name or an address to listen on: a newline or a space in it is a typo, not a host.
_HOST = name(r"[A-Za-z0-9_.:\[\]%-]{1,253}", "a host name or IP address", "127.0.0.1 or 0.0.0.0")


def _cartesia_options(parser: argparse.ArgumentParser, path: str) -> None:
    schemes = ("ws", "wss") if path.endswith("websocket") else ("http", "https")
    parser.add_argument(
        "--url",
        type=url(*schemes, example=f"{schemes[0]}://HOST:PORT{path}"),
        help=f"e.g. {schemes[0]}://HOST:PORT{path} (required; with --in-vpc, default: the stack's ApiUrl)",
    )
    # No type= with the default: argparse would check $CARTESIA_API_KEY as if typed as --api-key;
    # check_probe checks whichever was used, and never shows it.
    parser.add_argument("--api-key", type=_API_KEY, help="X-API-Key (default: $CARTESIA_API_KEY)")
    parser.add_argument(
        "--cartesia-version",
        type=HEADER_VALUE,
        default=DEFAULT_CARTESIA_VERSION,
        help="Cartesia-Version header (the default is what the official SDK 4.2.0 sends; a self-hosted "
        "release may want the one its documentation names)",
    )
    parser.add_argument(
        "--ca-bundle",
        type=ca_bundle_argument,
        metavar="FILE",
        help="wss:// or https:// with a private CA: trust the CA certificates in this PEM file (only them)",
    )


def add_parser(subparsers: Any) -> None:
    probe = subparsers.add_parser("probe", help="measure time to first audio under load (either route)")
    routes = probe.add_subparsers(dest="probe_command", metavar="TARGET", required=True)
    ws = routes.add_parser("ws", formatter_class=_HELP, help="Cartesia WebSocket API (ECS route)")
    _cartesia_options(ws, "/tts/websocket")
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
        "--piece-interval-ms", type=_MS, help="pause between pieces, the LLM's pace (default: 100)"
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
        type=_SECONDS_OR_ZERO,
        help="a call's socket idle for longer is replaced before its next turn (default: 300)",
    )
    http = routes.add_parser("http", formatter_class=_HELP, help="streamed bytes over HTTP (POST /tts/bytes)")
    _cartesia_options(http, "/tts/bytes")
    sagemaker = routes.add_parser(
        "sagemaker", formatter_class=_HELP, help="SageMaker InvokeEndpointWithResponseStream"
    )
    sagemaker.add_argument(
        "--endpoint",
        type=ENDPOINT_NAME,
        help="endpoint name (required; with --in-vpc, default: the stack's EndpointName)",
    )
    sagemaker.add_argument("--region", type=REGION_NAME, help="with --in-vpc, default: the stack's Region")
    sagemaker.add_argument(
        "--endpoint-url",
        type=url("http", "https", example="http://127.0.0.1:8080"),
        help="e.g. the reference server, http://127.0.0.1:PORT",
    )
    sagemaker.add_argument(
        "--client",
        choices=("async", "boto3"),
        default="async",
        help="async: boto3's request (endpoint, credentials, headers, SigV4) and error parsing, with aiohttp's "
        "I/O on the event loop; boto3: the boto3 client itself, one thread per request (what a boto3 app sees)",
    )
    for route in (ws, http, sagemaker):
        _load_options(route)
        _slo_options(route)
        in_vpc_arguments.add_options(route, "--concurrency 64 at 32 streams a task: 2 tasks")
        route.add_argument_group("canary").add_argument(
            "--publish-metrics",
            type=ENVIRONMENT,
            metavar="ENV",
            help=f"after the run, put its canary metrics to CloudWatch ({NAMESPACE}: TTFA, requests, "
            "failures, throttles; dimensions Environment=ENV and Route); a failed publish exits 1",
        )
        route.set_defaults(func=run_probe, check=check_probe, command_parser=route)
    _serve_parser(routes)
    add_turn_parser(routes)
    compare = routes.add_parser("compare", help="print and plot two runs side by side")
    compare.add_argument("first", type=_run_folder, help="a run's folder (or its summary.json)")
    compare.add_argument("second", type=_run_folder, help="the other run's folder (or its summary.json)")
    compare.add_argument("--png", type=output_file("the plot"), default=Path("compare.png"))
    compare.set_defaults(func=run_compare, check=check_compare, command_parser=compare)


def _serve_parser(routes: Any) -> None:
    serve = routes.add_parser(
        "serve", formatter_class=_HELP, help="a local reference server (measures the probe, not Sonic)"
    )
    serve.add_argument("--host", type=_HOST, default="127.0.0.1")
    serve.add_argument("--port", type=whole(0, 65535, "a TCP port"), default=8080, help="0 picks a free port")
    serve.add_argument("--first-byte-ms", type=_MS, default=90.0)
    serve.add_argument("--jitter-ms", type=_MS, default=0.0, help="uniform extra first-byte delay 0..J")
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
    serve.add_argument("--stall-ms", type=_MS, default=2000.0)
    serve.add_argument(
        "--parts",
        choices=("aligned", "split", "packed", "mixed"),
        default="aligned",
        help="how SageMaker PayloadParts cut the JSON lines",
    )
    serve.add_argument(
        "--api-key",
        type=_API_KEY,
        help="require this key (as X-API-Key, Authorization: Bearer or ?api_key=)",
    )
    serve.add_argument(
        "--llm-first-token-ms",
        type=_MS,
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
        type=_MS,
        default=300.0,
        help="the speech-to-text stand-ins (Ink, Transcribe): the final transcript this long after speech ends",
    )
    serve.add_argument(
        "--stt-transcript",
        help="the speech-to-text stand-ins: every turn's transcript (default: a fixed one)",
    )
    serve.add_argument("--seed", type=_SEED, default=1)
    serve.add_argument("--exit-after", type=_SECONDS, help="stop by itself after this many seconds")
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
    serve.set_defaults(func=run_serve, check=check_serve, command_parser=serve, serve_parser=serve)


def _template(args: argparse.Namespace) -> RequestTemplate:
    encoding, rate = PRESETS[args.preset] if args.preset else PRESETS["studio"]
    audio = AudioFormat(args.encoding or encoding, args.sample_rate or rate)
    transcripts = args.transcripts or load_transcripts(args.transcript, None)
    return RequestTemplate(transcripts, args.voice_id, args.model_id, args.language, audio)


def _agent(args: argparse.Namespace) -> AgentTraffic | None:
    if not getattr(args, "agent", False):
        return None
    given = {name: getattr(args, name) for name in AGENT_DEFAULTS}
    chosen = {name: AGENT_DEFAULTS[name] if value is None else value for name, value in given.items()}
    delay = chosen["max_buffer_delay_ms"]
    return AgentTraffic(
        split=str(chosen["split"]),
        interval_s=float(chosen["piece_interval_ms"]) / 1000,
        max_buffer_delay_ms=None if delay == "default" else int(delay),
        timestamps=not chosen["no_timestamps"],
        idle_reconnect_s=float(chosen["idle_reconnect_s"]),
    )


def _missing_extra(error: ImportError) -> int:
    print(f"sonic-deploy probe: {error.name} is missing: pip install 'sonic-deploy[probe]'", file=sys.stderr)
    return 2


def run_probe(args: argparse.Namespace) -> int:
    try:
        return _run_probe(args)
    except ImportError as error:
        return _missing_extra(error)


def _slo_problem(args: argparse.Namespace) -> str | None:
    if args.rate:
        return "--slo searches closed-loop concurrency: drop --rate"
    if args.concurrency is not args.default_concurrency:
        return "--slo chooses the concurrency levels itself: drop --concurrency (bound it with --slo-start, --slo-max)"
    if args.slo_start > args.slo_max:
        return f"--slo-start {args.slo_start} is above --slo-max {args.slo_max}"
    return None


def _slo_warning(args: argparse.Namespace) -> str | None:
    """An error share no level can measure: one failure in --requests is already more than it allows."""
    term = next((t for t in args.slo.terms if t.measure == "errors" and t.limit > 0), None)
    if term is None or term.limit >= 1 / args.requests:
        return None
    return (
        f"--slo {term.text} with --requests {args.requests}: one failed request is already "
        f"{1 / args.requests:.1%}, so no error at all is allowed; give --requests "
        f"{math.ceil(1 / term.limit)} or more for that share to mean what it says"
    )


# The agent options and their defaults: given without --agent, they would be silently ignored.
AGENT_DEFAULTS: dict[str, Any] = {
    "split": "sentence",
    "piece_interval_ms": 100.0,
    "max_buffer_delay_ms": 0,
    "no_timestamps": False,
    "idle_reconnect_s": 300.0,
}


def _agent_problem(args: argparse.Namespace) -> str | None:
    if args.probe_command != "ws":
        return None
    given = [name for name in AGENT_DEFAULTS if getattr(args, name) is not None]
    if not args.agent:
        if given:
            options = ", ".join("--" + name.replace("_", "-") for name in given)
            return f"{options} shape an agent's turns: add --agent, or drop {options}"
        return None
    if args.multiplex != 1:
        return (
            f"--agent gives each call a socket of its own; drop --multiplex {args.multiplex}, "
            "or drop --agent to multiplex whole transcripts"
        )
    from sonic_deploy.probe.requests import split_pieces

    interval_ms = (
        args.piece_interval_ms if args.piece_interval_ms is not None else AGENT_DEFAULTS["piece_interval_ms"]
    )
    split = args.split or AGENT_DEFAULTS["split"]
    pieces = max(len(split_pieces(t, split)) for t in _template(args).transcripts)
    sending_s = (pieces - 1) * interval_ms / 1000
    if sending_s >= args.timeout:
        return (
            f"a turn of {pieces} pieces every {interval_ms:g} ms takes {sending_s:g} s to send, "
            f"not less than --timeout {args.timeout:g}: raise --timeout, or lower --piece-interval-ms"
        )
    return None


def check_probe(args: argparse.Namespace) -> str | None:
    """What makes a probe run's options wrong together, found before any request (None: nothing)."""
    problem = in_vpc_arguments.check(args)
    if problem is not None:
        return problem
    if args.in_vpc is None:  # in the VPC, the stack's outputs give them
        needed = "--url" if args.probe_command in ("ws", "http") else "--endpoint"
        if getattr(args, needed.removeprefix("--")) is None:
            return f"{needed} is required. Fix: give {needed}, or --in-vpc ENV to probe a deployed stack from its VPC"
    # No --api-key: $CARTESIA_API_KEY, checked alike (with --in-vpc, the tasks' own, from Secrets Manager).
    if hasattr(args, "api_key") and args.api_key is None and args.in_vpc is None:
        args.api_key = os.environ.get("CARTESIA_API_KEY", "")
        try:
            _API_KEY(args.api_key)
        except argparse.ArgumentTypeError as error:
            return str(error)
    problem = _agent_problem(args) or (_slo_problem(args) if args.slo is not None else None)
    if problem is not None:
        return problem
    if args.rate:
        expected = max(args.rate) * args.duration
        if expected > MAX_REQUESTS:
            return (
                f"--rate {max(args.rate):g} for --duration {args.duration:g} s is {expected:.3g} requests a "
                f"level, more than {MAX_REQUESTS}. Fix: a lower --rate or a shorter --duration"
            )
    if args.out is not None and (args.out / SAMPLES).exists():
        return f"--out {one_line(str(args.out))} already holds a run ({SAMPLES}). Fix: choose another --out"
    return None


def _run_probe(args: argparse.Namespace) -> int:
    from sonic_deploy.probe.capacity_search import SearchRange, SloSearch
    from sonic_deploy.probe.load import Level, ProbeSettings, TargetSpec
    from sonic_deploy.probe.output import Progress, RunOutput, default_out_dir, stderr_or_none
    from sonic_deploy.probe.workers import run_levels, run_schedule

    route = args.probe_command
    session: in_vpc.Session | None = None
    store: in_vpc.ObjectStore | None = None
    if args.in_vpc_task is not None:  # inside a task: the run's store first (it may hold the transcripts)
        store = in_vpc.task_store(args)
    elif args.in_vpc is not None:
        try:
            session = _in_vpc_session(args)  # fills --url, --endpoint... from the stack's outputs
        except in_vpc.InVpcError as error:
            print(f"sonic-deploy probe: {error}", file=sys.stderr)
            return 2
    target = TargetSpec(
        route=route,
        url=getattr(args, "url", None),
        endpoint=getattr(args, "endpoint", None),
        region=getattr(args, "region", None),
        endpoint_url=getattr(args, "endpoint_url", None),
        api_key=getattr(args, "api_key", None) or "",
        cartesia_version=getattr(args, "cartesia_version", DEFAULT_CARTESIA_VERSION),
        multiplex=getattr(args, "multiplex", 1),
        timeout_s=args.timeout,
        client=getattr(args, "client", "async"),
        agent=_agent(args),
        ca_bundle=getattr(args, "ca_bundle", None),
    )
    settings = ProbeSettings(
        target,
        _template(args),
        args.audible_threshold_db,
        args.playback_delay_ms,
        args.max_in_flight,
        args.seed,
        args.ramp_up,
        args.error_backoff_ms / 1000,
    )

    def closed_loop(index: int, concurrency: int) -> Level:
        warmup = concurrency if args.warmup is None else args.warmup
        return Level(index, concurrency=concurrency, requests=args.requests, warmup=warmup)

    search: SloSearch | None = None
    levels: list[Level] = []
    if args.slo is not None:
        warning = _slo_warning(args)
        if warning is not None:
            print(f"sonic-deploy probe: note: {warning}", file=sys.stderr)
        search = SloSearch(
            args.slo, SearchRange(args.slo_start, args.slo_max, args.slo_resolution), closed_loop
        )
    elif args.rate:
        levels = [
            Level(i, rate=r, duration_s=args.duration, warmup=args.warmup or 0, arrivals=args.arrivals)
            for i, r in enumerate(args.rate)
        ]
    else:
        levels = [closed_loop(i, int(c)) for i, c in enumerate(args.concurrency)]
    if route == "sagemaker":
        from sonic_deploy.probe.targets.sagemaker import setup_problem

        problem = setup_problem(target.region, target.endpoint_url)
        if problem is not None:
            print(f"sonic-deploy probe: {problem}", file=sys.stderr)
            return 2
    # --publish-metrics: the stack's Region and --profile with --in-vpc (the run's own account), else boto3's
    # chain (in the canary's task, AWS_DEFAULT_REGION, which ECS sets); refused before the run if there is none.
    publish_to = (args.profile, session.deployment.region) if session is not None else (None, target.region)
    if args.publish_metrics is not None and store is None:
        from sonic_deploy.probe.publish_metrics import region_of

        if region_of(*publish_to) is None:
            print(
                "sonic-deploy probe: --publish-metrics: no AWS Region to publish to. Fix: set AWS_DEFAULT_REGION "
                "(or a profile's region), or add --in-vpc ENV (the stack's Region)",
                file=sys.stderr,
            )
            return 2
    if store is not None:
        from sonic_deploy.in_vpc.task import level_runner, serve

        def permitted(level: Level) -> str | None:
            """Why this task's own options would not make `level` (None: they would): a sweep's levels are
            its own list's; a search's, any concurrency up to --slo-max, with the options' requests and
            warm-ups. A forged command in the bucket cannot make a task a load generator of its own."""
            if search is None:
                if level.index < len(levels) and level == levels[level.index]:
                    return None
                return f"{level} is not one of its own levels"
            concurrency = level.concurrency or 0
            if not 1 <= concurrency <= args.slo_max:
                return f"concurrency {concurrency} is not within its --slo-max {args.slo_max}"
            if level != closed_loop(level.index, concurrency):
                return f"{level} is not what its options make ({closed_loop(level.index, concurrency)})"
            return None

        return serve(
            store,
            args.task_index,
            args.task_count,
            level_runner(settings, args.task_index, args.task_count, permitted),
        )
    out_dir: Path = args.out or default_out_dir(route)
    try:
        described = (
            target.describe() if session is None else {**target.describe(), "in_vpc": session.describe()}
        )
        output = RunOutput(out_dir, described, Progress(stderr_or_none(args.quiet)), search)
    except FileExistsError as error:
        print(f"sonic-deploy probe: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # e.g. under /proc or /sys, which argparse's check cannot tell from a folder
        print(
            f"sonic-deploy probe {route}: --out {one_line(repr(str(out_dir)))}: cannot write the run there "
            f"({error.strerror or type(error).__name__}). Fix: give a folder you can write",
            file=sys.stderr,
        )
        return 2
    print(f"probe {route}: writing to {out_dir}/", file=sys.stderr)
    interrupted: int | None = None
    failed = False
    try:
        if session is not None:
            from sonic_deploy.in_vpc.runner import run_schedule_in_vpc
            from sonic_deploy.probe.workers import fixed

            schedule = fixed(levels) if search is None else search.levels()
            session.run(
                lambda conversation: run_schedule_in_vpc(conversation, schedule, output, args.timeout)
            )
        elif search is None:
            run_levels(settings, levels, max(1, args.workers), output)
        else:
            run_schedule(settings, search.levels(), max(1, args.workers), output)
    except KeyboardInterrupt as stop:
        interrupted = stop.exit_code if isinstance(stop, in_vpc.Terminated) else 130
        output.interrupted()
    except in_vpc.InVpcError as error:
        failed = True
        output.interrupted()
        print(f"sonic-deploy probe: {error}", file=sys.stderr)
    finally:
        output.close()
        output.write_summary()
    # report imports matplotlib, which needs a writable MPLCONFIGDIR (the task's /tmp): only after the run.
    from sonic_deploy.probe.report import summary_table, write_report

    if output.levels and not args.no_report:
        write_report(out_dir)
    print(summary_table(output.summary()))
    if search is not None and (search.result is None or search.result.max_concurrency is None):
        # No answer: said where it is not missed. The run itself worked (the levels are measurements),
        # so the exit code stays 0, unless interrupted.
        print(f"sonic-deploy probe: {search.verdict()}", file=sys.stderr)
    if interrupted is not None:
        return interrupted
    if failed:
        return 1
    if args.publish_metrics is not None:
        return _publish_metrics(args, out_dir, *publish_to)
    return 0


def _in_vpc_session(args: argparse.Namespace) -> in_vpc.Session:
    """The in-VPC run of `probe ws|http|sagemaker`: the ECS stack for ws and http, the SageMaker one for
    sagemaker; the target's options default to the stack's outputs."""
    from sonic_deploy.connect.deployment import api_urls

    route = args.probe_command
    stack_route = "sagemaker" if route == "sagemaker" else "ecs"

    def defaults(deployment: in_vpc.ProbeDeployment) -> dict[str, str]:
        out = deployment.outputs
        if route == "sagemaker":
            return {"--endpoint": out["EndpointName"], "--region": out["Region"]}
        websocket, base = api_urls(out["ApiUrl"], deployment.stack_name)
        return {
            "--url": websocket if route == "ws" else f"{base}/tts/bytes",
            "--model-id": out["ModelId"],
            "--cartesia-version": out["CartesiaVersion"],
        }

    label = None
    if args.slo is not None:  # the search may reach --slo-max: the tasks are there for it from the start
        load: tuple[int | None, float | None] = (args.slo_max, None)
        label = f"--slo up to --slo-max {args.slo_max}"
    elif args.rate:
        load = (None, max(args.rate))
    else:
        load = (max(args.concurrency), None)
    argv: list[str] = args.argv
    at = argv.index(route, argv.index("probe") + 1) + 1
    return in_vpc.prepare(args, args.command_parser, argv[at:], argv[:at], stack_route, load, defaults, label)


def _publish_metrics(args: argparse.Namespace, out_dir: Path, profile: str | None, region: str | None) -> int:
    from sonic_deploy.probe import publish_metrics
    from sonic_deploy.probe.output import read_samples

    route = publish_metrics.ROUTES[args.probe_command]
    data = publish_metrics.metric_data(
        read_samples(out_dir), args.publish_metrics, route, datetime.datetime.now(datetime.UTC)
    )
    try:
        calls = publish_metrics.publish(publish_metrics.cloudwatch_client(profile, region), data)
    except publish_metrics.PublishError as error:
        print(f"sonic-deploy probe: --publish-metrics: {error}", file=sys.stderr)
        return 1
    print(
        f"sonic-deploy probe: published {len(data)} data to {NAMESPACE} (Environment={args.publish_metrics}, "
        f"Route={route}) in {calls} call(s)",
        file=sys.stderr,
    )
    return 0


def check_serve(args: argparse.Namespace) -> str | None:
    if (args.tls_cert is None) != (args.tls_key is None):
        given, missing = ("--tls-cert", "--tls-key") if args.tls_key is None else ("--tls-key", "--tls-cert")
        return (
            f"{given} without {missing}: TLS needs both the certificate chain and its private key (PEM). "
            "Fix: give both, or neither for plain http:// and ws://"
        )
    return None


def run_serve(args: argparse.Namespace) -> int:
    try:
        from sonic_deploy.standins.reference_stream import ServerConfig
        from sonic_deploy.standins.server import serve, tls_context
    except ImportError as error:
        return _missing_extra(error)

    parser: argparse.ArgumentParser = args.serve_parser
    faults: dict[str, int] = {}
    for kind, every in args.fault:
        faults[kind] = every
    config = ServerConfig(
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
        faults=faults,
        stall_ms=args.stall_ms,
        parts=args.parts,
        api_key=args.api_key,
        seed=args.seed,
        exit_after_s=args.exit_after,
        tls_cert=None if args.tls_cert is None else str(args.tls_cert),
        tls_key=None if args.tls_key is None else str(args.tls_key),
        llm_first_token_ms=args.llm_first_token_ms,
        llm_tokens_per_s=args.llm_tokens_per_s,
        stt_final_ms=args.stt_final_ms,
        stt_transcript=args.stt_transcript,
    )
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
            runner.run(serve(config))
    except OSError as error:  # the address is taken, not this host's, or not a host at all
        parser.error(
            f"cannot serve on --host {one_line(repr(args.host))} --port {args.port}: {error.strerror or error}. "
            "Fix: another --port (0 picks a free one), or a --host of this machine (127.0.0.1, 0.0.0.0)"
        )
    return 0


def check_compare(args: argparse.Namespace) -> str | None:
    """Both runs' summaries as the probe writes them: a corrupt or edited one is refused, naming the field.
    The checked summaries are what compare shows (`args.runs`): each file is read once."""
    args.runs = [read_run(folder) for folder in (args.first, args.second)]  # a ConfigError names the field
    return None


def run_compare(args: argparse.Namespace) -> int:
    try:
        from sonic_deploy.probe.report import compare
    except ImportError as error:
        return _missing_extra(error)

    print(compare(args.first, args.second, args.runs, args.png))
    return 0
