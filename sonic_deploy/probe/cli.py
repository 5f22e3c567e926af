"""`sonic-deploy probe ws|http|sagemaker|serve|compare|turn`."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import ssl
import sys
from pathlib import Path
from typing import Any

from sonic_deploy.client.cartesia_api import DEFAULT_BUFFER_DELAY_MS, MAX_BUFFER_DELAY_MS
from sonic_deploy.client.trust import ca_bundle_argument
from sonic_deploy.probe.capacity_search import DEFAULT_MAXIMUM, DEFAULT_START
from sonic_deploy.probe.requests import (
    DEFAULT_CARTESIA_VERSION,
    DEFAULT_MODEL_ID,
    DEFAULT_VOICE_ID,
    ENCODINGS,
    PRESETS,
    SAMPLE_RATES,
    SPLITS,
    AgentTraffic,
    AudioFormat,
    RequestTemplate,
    load_transcripts,
)
from sonic_deploy.probe.slo import EXAMPLE, Slo, SloError, parse_slo
from sonic_deploy.probe.turn.command import add_turn_parser

_HELP = argparse.ArgumentDefaultsHelpFormatter


def _numbers(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive numbers, got {text!r}")
    return values


def _ramp_up(text: str) -> float | None:
    if text == "auto":
        return None
    try:
        return _non_negative(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected seconds >= 0 or auto, got {text!r}") from None


def _transcript_file(text: str) -> tuple[str, ...]:
    """The transcripts of a readable file (read once, here), or an argparse error naming it."""
    try:
        return load_transcripts(None, Path(text))
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot read {text}: {error.strerror}") from None
    except (UnicodeDecodeError, ValueError) as error:
        reason = "not UTF-8 text" if isinstance(error, UnicodeDecodeError) else str(error)
        raise argparse.ArgumentTypeError(
            f"{reason}: give a UTF-8 file of transcripts, one per line"
        ) from None


def _fault(text: str) -> tuple[str, int]:
    """`KIND:EVERY` (EVERY defaults to 1), with KIND one the reference server injects."""
    from sonic_deploy.probe.reference_stream import FAULTS

    kind, _, every = text.partition(":")
    if kind not in FAULTS:
        raise argparse.ArgumentTypeError(
            f"unknown fault {kind!r} in {text!r}: use one of {', '.join(FAULTS)}"
        )
    if every and not (every.isdigit() and int(every) > 0):
        raise argparse.ArgumentTypeError(
            f"{text!r}: EVERY must be a whole number above 0 (every N-th stream), e.g. {kind}:10"
        )
    return kind, int(every or 1)


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _positive(text: str) -> float:
    try:
        value = _non_negative(text)
    except argparse.ArgumentTypeError:
        value = 0.0
    if value == 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def _buffer_delay(text: str) -> int | str:
    if text == "default":
        return text
    if not text.isdigit() or int(text) > MAX_BUFFER_DELAY_MS:
        raise argparse.ArgumentTypeError(
            f"expected whole milliseconds 0-{MAX_BUFFER_DELAY_MS} (the API's range) or default, got {text!r}"
        )
    return int(text)


def _load_options(parser: argparse.ArgumentParser) -> None:
    request = parser.add_argument_group("request")
    request.add_argument("--transcript", help="text to speak (default: a short sentence)")
    request.add_argument(
        "--transcripts", type=_transcript_file, metavar="FILE", help="file of transcripts, one per line"
    )
    request.add_argument("--voice-id", default=DEFAULT_VOICE_ID)
    request.add_argument("--model-id", default=DEFAULT_MODEL_ID, help="model_id for the Cartesia API")
    request.add_argument("--language", default="en")
    request.add_argument("--preset", choices=sorted(PRESETS), help="telephony = 8 kHz mu-law")
    request.add_argument("--encoding", choices=ENCODINGS, help="default pcm_s16le")
    request.add_argument("--sample-rate", type=int, choices=SAMPLE_RATES, help="default 44100")
    load = parser.add_argument_group("load")
    load.add_argument("--concurrency", type=_numbers, default=[1, 2, 4, 8, 16], help="closed-loop levels")
    load.add_argument("--requests", type=int, default=50, help="measured requests per closed-loop level")
    load.add_argument(
        "--warmup", type=int, help="uncounted requests before each level (default: concurrency)"
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
        type=float,
        default=100.0,
        help="closed loop: pause of a slot after a failed request",
    )
    load.add_argument("--rate", type=_numbers, help="open loop instead: requests/s, comma-separated levels")
    load.add_argument("--duration", type=float, default=30.0, help="seconds per open-loop level")
    load.add_argument("--arrivals", choices=("poisson", "constant"), default="poisson")
    load.add_argument("--workers", type=int, default=1, help="client processes (histograms merge exactly)")
    load.add_argument("--max-in-flight", type=int, default=1024, help="open-loop cap on requests in flight")
    measure = parser.add_argument_group("measurement and output")
    measure.add_argument("--timeout", type=float, default=30.0, help="seconds per request, end to end")
    measure.add_argument(
        "--audible-threshold-db",
        type=float,
        default=-40.0,
        help="first audible audio: first sample at or above this dBFS",
    )
    measure.add_argument(
        "--playback-delay-ms",
        type=float,
        default=0.0,
        help="player buffer before playback starts (underrun simulation)",
    )
    measure.add_argument("--out", type=Path, help="output folder (default: a new timestamped folder)")
    measure.add_argument("--no-report", action="store_true", help="skip report.png")
    measure.add_argument("--quiet", action="store_true", help="no live progress line")
    measure.add_argument("--seed", type=int, default=1)


def _slo(text: str) -> Slo:
    try:
        return parse_slo(text)
    except SloError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _streams(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of streams >= 1, got {text!r}")
    return value


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


def _cartesia_options(parser: argparse.ArgumentParser, path: str) -> None:
    parser.add_argument("--url", required=True, help=f"e.g. ws://HOST:PORT{path} (http:// for bytes)")
    parser.add_argument(
        "--api-key",
        default=os.environ.get("CARTESIA_API_KEY", ""),
        help="X-API-Key (default: $CARTESIA_API_KEY)",
    )
    parser.add_argument(
        "--cartesia-version",
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
    ws.add_argument("--multiplex", type=int, default=1, help="contexts per socket (default: one socket each)")
    agent = ws.add_argument_group(
        "agent-like traffic",
        "--agent sends each transcript as a voice agent does: pieces with continue: true at an LLM's pace "
        "on one long-lived socket per call, reused turn after turn, then an empty continue: false",
    )
    agent.add_argument("--agent", action="store_true", help="send turns as an agent does (see above)")
    agent.add_argument("--split", choices=SPLITS, help="a piece is a sentence or a word (default: sentence)")
    agent.add_argument(
        "--piece-interval-ms", type=_non_negative, help="pause between pieces, the LLM's pace (default: 100)"
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
        type=_non_negative,
        help="a call's socket idle for longer is replaced before its next turn (default: 300)",
    )
    http = routes.add_parser("http", formatter_class=_HELP, help="streamed bytes over HTTP (POST /tts/bytes)")
    _cartesia_options(http, "/tts/bytes")
    sagemaker = routes.add_parser(
        "sagemaker", formatter_class=_HELP, help="SageMaker InvokeEndpointWithResponseStream"
    )
    sagemaker.add_argument("--endpoint", required=True, help="endpoint name")
    sagemaker.add_argument("--region")
    sagemaker.add_argument("--endpoint-url", help="e.g. the reference server, http://127.0.0.1:PORT")
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
        route.set_defaults(func=run_probe)
    _serve_parser(routes)
    add_turn_parser(routes)
    compare = routes.add_parser("compare", help="print and plot two runs side by side")
    compare.add_argument("first", type=Path)
    compare.add_argument("second", type=Path)
    compare.add_argument("--png", type=Path, default=Path("compare.png"))
    compare.set_defaults(func=run_compare)


def _serve_parser(routes: Any) -> None:
    serve = routes.add_parser(
        "serve", formatter_class=_HELP, help="a local reference server (measures the probe, not Sonic)"
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080, help="0 picks a free port")
    serve.add_argument("--first-byte-ms", type=float, default=90.0)
    serve.add_argument("--jitter-ms", type=float, default=0.0, help="uniform extra first-byte delay 0..J")
    serve.add_argument("--chunk-ms", type=int, default=20, help="audio per chunk")
    serve.add_argument("--pace", type=float, default=0.5, help="chunk interval / chunk audio (0 = flat out)")
    serve.add_argument(
        "--audio-ms",
        type=int,
        help="audio per piece of text; a whole request is one (default: --ms-per-char x length)",
    )
    serve.add_argument("--ms-per-char", type=float, default=60.0)
    serve.add_argument("--leading-silence-ms", type=int, default=0)
    serve.add_argument("--capacity", type=int, help="429 beyond this many concurrent streams")
    serve.add_argument(
        "--fault",
        action="append",
        type=_fault,
        default=[],
        metavar="KIND:EVERY",
        help="every N-th stream gets KIND: reset, stall, malformed, error, stream_error, "
        "status500, status422 (repeatable)",
    )
    serve.add_argument("--stall-ms", type=float, default=2000.0)
    serve.add_argument(
        "--parts",
        choices=("aligned", "split", "packed", "mixed"),
        default="aligned",
        help="how SageMaker PayloadParts cut the JSON lines",
    )
    serve.add_argument(
        "--api-key", help="require this key (as X-API-Key, Authorization: Bearer or ?api_key=)"
    )
    serve.add_argument(
        "--llm-first-token-ms",
        type=_non_negative,
        default=400.0,
        help="the LLM stand-in (POST /v1/chat/completions): first token this long after the request",
    )
    serve.add_argument(
        "--llm-tokens-per-s",
        type=_positive,
        default=50.0,
        help="the LLM stand-in: tokens a second after the first",
    )
    serve.add_argument(
        "--stt-final-ms",
        type=_non_negative,
        default=300.0,
        help="the speech-to-text stand-ins (Ink, Transcribe): the final transcript this long after speech ends",
    )
    serve.add_argument(
        "--stt-transcript",
        help="the speech-to-text stand-ins: every turn's transcript (default: a fixed one)",
    )
    serve.add_argument("--seed", type=int, default=1)
    serve.add_argument("--exit-after", type=float, help="stop by itself after this many seconds")
    serve.add_argument(
        "--tls-cert",
        type=Path,
        metavar="FILE",
        help="serve https:// and wss:// with this certificate chain (PEM; with --tls-key)",
    )
    serve.add_argument(
        "--tls-key", type=Path, metavar="FILE", help="the certificate's private key (PEM, unencrypted)"
    )
    serve.set_defaults(func=run_serve, serve_parser=serve)


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


def _run_probe(args: argparse.Namespace) -> int:
    from sonic_deploy.probe.capacity_search import SearchRange, SloSearch
    from sonic_deploy.probe.load import Level, ProbeSettings, TargetSpec
    from sonic_deploy.probe.output import Progress, RunOutput, default_out_dir, stderr_or_none
    from sonic_deploy.probe.report import summary_table, write_report
    from sonic_deploy.probe.workers import run_levels, run_schedule

    route = args.probe_command
    problem = _agent_problem(args)
    if problem is not None:
        print(f"sonic-deploy probe ws: {problem}", file=sys.stderr)
        return 2
    target = TargetSpec(
        route=route,
        url=getattr(args, "url", None),
        endpoint=getattr(args, "endpoint", None),
        region=getattr(args, "region", None),
        endpoint_url=getattr(args, "endpoint_url", None),
        api_key=getattr(args, "api_key", ""),
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
        problem = _slo_problem(args)
        if problem is not None:
            print(f"sonic-deploy probe: {problem}", file=sys.stderr)
            return 2
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
    out_dir: Path = args.out or default_out_dir(route)
    try:
        output = RunOutput(out_dir, target.describe(), Progress(stderr_or_none(args.quiet)), search)
    except FileExistsError as error:
        print(f"sonic-deploy probe: {error}", file=sys.stderr)
        return 2
    print(f"probe {route}: writing to {out_dir}/", file=sys.stderr)
    interrupted = False
    try:
        if search is None:
            run_levels(settings, levels, max(1, args.workers), output)
        else:
            run_schedule(settings, search.levels(), max(1, args.workers), output)
    except KeyboardInterrupt:
        interrupted = True
        output.interrupted()
    finally:
        output.close()
        output.write_summary()
    if output.levels and not args.no_report:
        write_report(out_dir)
    print(summary_table(output.summary()))
    if search is not None and (search.result is None or search.result.max_concurrency is None):
        # No answer: said where it is not missed. The run itself worked (the levels are measurements),
        # so the exit code stays 0, unless interrupted.
        print(f"sonic-deploy probe: {search.verdict()}", file=sys.stderr)
    return 130 if interrupted else 0


def run_serve(args: argparse.Namespace) -> int:
    try:
        from sonic_deploy.probe.reference_stream import ServerConfig
        from sonic_deploy.probe.server import serve, tls_context
    except ImportError as error:
        return _missing_extra(error)

    parser: argparse.ArgumentParser = args.serve_parser
    if (args.tls_cert is None) != (args.tls_key is None):
        given, missing = ("--tls-cert", "--tls-key") if args.tls_key is None else ("--tls-key", "--tls-cert")
        parser.error(
            f"{given} without {missing}: TLS needs both the certificate chain and its private key (PEM); "
            "give both, or neither for plain http:// and ws://"
        )
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
    from sonic_deploy.probe.event_loop import precise_loop, steady_collector

    # The standard loop on a selector whose timers fire when due (uvloop's, like epoll's, have millisecond
    # steps, and uvloop's cached clock can fire a delay early): the server's delays are the reference.
    with steady_collector(), asyncio.Runner(loop_factory=precise_loop) as runner:
        runner.run(serve(config))
    return 0


def run_compare(args: argparse.Namespace) -> int:
    try:
        from sonic_deploy.probe.report import compare
    except ImportError as error:
        return _missing_extra(error)

    print(compare(args.first, args.second, args.png))
    return 0
