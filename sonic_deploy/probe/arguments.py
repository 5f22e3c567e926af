"""The options `probe ws|http|sagemaker` share, defined once (their types, groups and checks), and the edge
where a checked command line becomes a typed `ProbeOptions` (options.py) for the run (run.py). Also the option
types `probe serve` shares with them."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from sonic_deploy.arguments import (
    ENVIRONMENT,
    HEADER_VALUE,
    IDENTIFIER,
    MAX_CONCURRENCY,
    MAX_MS,
    MAX_RATE,
    MAX_REQUESTS,
    MAX_SECONDS,
    input_file,
    listed,
    output_folder,
    real,
    secret,
    url,
    whole,
)
from sonic_deploy.audio import ENCODINGS, SAMPLE_RATES
from sonic_deploy.client.trust import ca_bundle_argument
from sonic_deploy.config.errors import one_line
from sonic_deploy.in_vpc import arguments as in_vpc_arguments
from sonic_deploy.probe.canary_metrics import NAMESPACE
from sonic_deploy.probe.capacity_search import DEFAULT_MAXIMUM, DEFAULT_START
from sonic_deploy.probe.options import ProbeOptions
from sonic_deploy.probe.requests import (
    DEFAULT_CARTESIA_VERSION,
    DEFAULT_MODEL_ID,
    DEFAULT_VOICE_ID,
    PRESETS,
    AgentTraffic,
    load_transcripts,
)
from sonic_deploy.probe.slo import EXAMPLE, Slo, SloError, parse_slo
from sonic_deploy.probe.summary_file import SAMPLES
from sonic_deploy.probe.wires import WIRES
from sonic_deploy.routes import ROUTES

HELP = argparse.ArgumentDefaultsHelpFormatter


# What the probe sends and how hard: each bounded (sonic_deploy/arguments.py says why).
_LEVELS = listed(whole(1, MAX_CONCURRENCY, "concurrent streams"), "concurrency levels")
_RATES = listed(real(0, MAX_RATE, "requests a second", low_open=True), "request rates")
_REQUESTS = whole(1, MAX_REQUESTS, "requests")
_WARMUP = whole(0, MAX_REQUESTS, "uncounted requests")
SECONDS = real(0, MAX_SECONDS, "seconds", low_open=True)
SECONDS_OR_ZERO = real(0, MAX_SECONDS, "seconds")
SEED = whole(-(2**63), 2**63 - 1, "a seed")
MS = real(0, MAX_MS, "milliseconds")


def _ramp_up(text: str) -> float | None:
    if text == "auto":
        return None
    try:
        return SECONDS_OR_ZERO(text)
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
    load.add_argument("--duration", type=SECONDS, default=30.0, help="seconds per open-loop level")
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
    measure.add_argument("--seed", type=SEED, default=1)


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


API_KEY = secret("--api-key", "CARTESIA_API_KEY")


def cartesia_options(parser: argparse.ArgumentParser, path: str) -> None:
    schemes = ("ws", "wss") if path.endswith("websocket") else ("http", "https")
    parser.add_argument(
        "--url",
        type=url(*schemes, example=f"{schemes[0]}://HOST:PORT{path}"),
        help=f"e.g. {schemes[0]}://HOST:PORT{path} (required; with --in-vpc, default: the stack's ApiUrl)",
    )
    # No type= with the default: argparse would check $CARTESIA_API_KEY as if typed as --api-key;
    # check_probe checks whichever was used, and never shows it.
    parser.add_argument("--api-key", type=API_KEY, help="X-API-Key (default: $CARTESIA_API_KEY)")
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


def add_run_options(route: argparse.ArgumentParser) -> None:
    """What every route's run takes: the request, the load, measurement and output, the capacity search, the
    in-VPC options and the canary's."""
    _load_options(route)
    _slo_options(route)
    in_vpc_arguments.add_options(route, "--concurrency 64 at 32 streams a task: 2 tasks")
    canary = route.add_argument_group("canary")
    canary.add_argument(
        "--publish-metrics",
        type=ENVIRONMENT,
        metavar="ENV",
        help=f"after the run, put its canary metrics to CloudWatch ({NAMESPACE}: TTFA, requests, "
        "failures, throttles; dimensions Environment=ENV and Route); a failed publish exits 1",
    )
    canary.add_argument(
        "--publish-route",
        choices=tuple(ROUTES),
        metavar="ROUTE",
        help="the Route dimension of --publish-metrics (the EKS stack's canary sets it); default: ecs for ws "
        "and http, sagemaker for sagemaker",
    )
    route.set_defaults(func=run_probe, check=check_probe, command_parser=route)


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
    transcripts = args.transcripts or load_transcripts(args.transcript, None)
    pieces = max(len(split_pieces(t, split)) for t in transcripts)
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
    route = getattr(args, "publish_route", None)
    if route is not None and args.publish_metrics is None:
        return (
            "--publish-route names the Route of --publish-metrics. Fix: add --publish-metrics ENV, or drop it"
        )
    if route is not None and ROUTES[route].wire is not WIRES[args.probe_command]:
        return (
            f"--publish-route {route}: that route's callers do not speak `probe {args.probe_command}`'s wire. Fix: "
            f"name a route of {WIRES[args.probe_command].value}'s ({', '.join(n for n, r in ROUTES.items() if r.wire is WIRES[args.probe_command])})"
        )
    if args.in_vpc is None:  # in the VPC, the stack's outputs give them
        needed = "--url" if args.probe_command in ("ws", "http") else "--endpoint"
        if getattr(args, needed.removeprefix("--")) is None:
            return f"{needed} is required. Fix: give {needed}, or --in-vpc ENV to probe a deployed stack from its VPC"
    # No --api-key: $CARTESIA_API_KEY, checked alike (with --in-vpc, the tasks' own, from Secrets Manager).
    if hasattr(args, "api_key") and args.api_key is None and args.in_vpc is None:
        args.api_key = os.environ.get("CARTESIA_API_KEY", "")
        try:
            API_KEY(args.api_key)
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


def _slo_problem(args: argparse.Namespace) -> str | None:
    if args.rate:
        return "--slo searches closed-loop concurrency: drop --rate"
    if args.concurrency is not args.default_concurrency:
        return "--slo chooses the concurrency levels itself: drop --concurrency (bound it with --slo-start, --slo-max)"
    if args.slo_start > args.slo_max:
        return f"--slo-start {args.slo_start} is above --slo-max {args.slo_max}"
    return None


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


def missing_extra(error: ImportError) -> int:
    print(f"sonic-deploy probe: {error.name} is missing: pip install 'sonic-deploy[probe]'", file=sys.stderr)
    return 2


def probe_options(args: argparse.Namespace) -> ProbeOptions:
    """A checked command line of `probe ws|http|sagemaker`, typed; a route's options that another's command
    line has not are their defaults."""
    return ProbeOptions(
        route=args.probe_command,
        argv=tuple(getattr(args, "argv", ())),
        url=getattr(args, "url", None),
        endpoint=getattr(args, "endpoint", None),
        region=getattr(args, "region", None),
        endpoint_url=getattr(args, "endpoint_url", None),
        api_key=getattr(args, "api_key", None) or "",
        cartesia_version=getattr(args, "cartesia_version", DEFAULT_CARTESIA_VERSION),
        multiplex=getattr(args, "multiplex", 1),
        client=getattr(args, "client", "async"),
        ca_bundle=getattr(args, "ca_bundle", None),
        agent=_agent(args),
        transcript=args.transcript,
        transcripts=args.transcripts,
        voice_id=args.voice_id,
        model_id=args.model_id,
        language=args.language,
        preset=args.preset,
        encoding=args.encoding,
        sample_rate=args.sample_rate,
        concurrency=tuple(args.concurrency),
        requests=args.requests,
        warmup=args.warmup,
        ramp_up=args.ramp_up,
        error_backoff_ms=args.error_backoff_ms,
        rate=None if args.rate is None else tuple(args.rate),
        duration=args.duration,
        arrivals=args.arrivals,
        workers=args.workers,
        max_in_flight=args.max_in_flight,
        timeout=args.timeout,
        audible_threshold_db=args.audible_threshold_db,
        playback_delay_ms=args.playback_delay_ms,
        out=args.out,
        no_report=args.no_report,
        quiet=args.quiet,
        seed=args.seed,
        slo=args.slo,
        slo_start=args.slo_start,
        slo_max=args.slo_max,
        slo_resolution=args.slo_resolution,
        in_vpc=in_vpc_arguments.options(args),
        publish_metrics=args.publish_metrics,
        publish_route=args.publish_route,
    )


def run_probe(args: argparse.Namespace) -> int:
    """`probe ws|http|sagemaker`: the options typed here, at the edge, then the run (run.py)."""
    try:
        from sonic_deploy.probe.run import run

        return run(probe_options(args), args.command_parser)
    except ImportError as error:
        return missing_extra(error)
