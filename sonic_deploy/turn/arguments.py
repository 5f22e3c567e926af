"""`sonic-deploy probe turn`'s options, what they refuse together, and the edge where a checked command line
becomes a typed `TurnOptions` (options.py) for the run (command.py)."""

from __future__ import annotations

import argparse
import json
from typing import Any
from urllib.parse import urlsplit

from sonic_deploy.arguments import (
    ENDPOINT_NAME,
    MAX_CONCURRENCY,
    MAX_MS,
    MAX_RATE,
    MAX_REQUESTS,
    MAX_SECONDS,
    REGION_NAME,
    input_file,
    output_folder,
    real,
    url,
    whole,
)
from sonic_deploy.client.trust import ca_bundle_argument
from sonic_deploy.in_vpc import arguments as in_vpc_arguments
from sonic_deploy.probe.requests import DEFAULT_CARTESIA_VERSION, DEFAULT_MODEL_ID, DEFAULT_VOICE_ID
from sonic_deploy.routes import ROUTES, Wire
from sonic_deploy.turn import command
from sonic_deploy.turn.budget import DEFAULT_BUDGET
from sonic_deploy.turn.caller_audio import MAX_WAV_BYTES, SHIPPED
from sonic_deploy.turn.options import TurnOptions

SYSTEM_PROMPT = (
    "You are the phone agent of a restaurant. Answer in one or two short sentences, as spoken English: "
    "no lists, no markdown."
)
_HELP = argparse.ArgumentDefaultsHelpFormatter


_count = whole(1, MAX_REQUESTS, "a count")
_MS = real(0, MAX_MS, "milliseconds")
_TIMEOUT = real(0, 3600, "seconds", low_open=True)
_WS = url("ws", "wss", "http", "https", example="wss://api.cartesia.ai")
_HTTP = url("http", "https", example="https://api.openai.com/v1")


def add_turn_parser(routes: Any) -> None:
    turn = routes.add_parser(
        "turn",
        formatter_class=_HELP,
        help="time whole turns: caller audio -> speech to text -> language model -> Sonic -> first audio",
        description="Simulated calls: caller audio at real-time pace into a speech-to-text service, its final "
        "transcript to a language model, the tokens into Sonic on either route; each turn timed from the end "
        "of the caller's speech to the first audible sample of the reply, hop by hop. Keys come from the "
        "environment, never the command line: CARTESIA_API_KEY (the ECS route's key), CARTESIA_STT_API_KEY "
        "(Cartesia's cloud key for Ink; CARTESIA_API_KEY if unset), OPENAI_API_KEY (an OpenAI-compatible "
        "model); AWS credentials from boto3's chain.",
    )
    stt = turn.add_argument_group("speech to text")
    stt.add_argument("--stt", choices=("ink", "transcribe"), default="ink")
    stt.add_argument(
        "--stt-url",
        type=_WS,
        default="wss://api.cartesia.ai",
        help="Ink: the API's root (probe serve: ws://HOST:PORT)",
    )
    stt.add_argument("--stt-model", default="ink-2", help="Ink: the model")
    stt.add_argument(
        "--transcribe-region", type=REGION_NAME, help="Transcribe: the Region (default: boto3's)"
    )
    stt.add_argument(
        "--transcribe-endpoint-url",
        type=_WS,
        help="Transcribe: another endpoint (probe serve: ws://HOST:PORT)",
    )
    stt.add_argument("--language-code", default="en-US", help="Transcribe: the caller's language")
    llm = turn.add_argument_group("language model")
    llm.add_argument("--llm", choices=("openai", "bedrock"), default="openai")
    llm.add_argument(
        "--llm-url",
        type=_HTTP,
        help="OpenAI-compatible: the API root with its version, e.g. https://api.openai.com/v1",
    )
    llm.add_argument(
        "--llm-model", help="the model: a name (OpenAI-compatible) or a Bedrock model or inference profile id"
    )
    llm.add_argument("--bedrock-region", type=REGION_NAME, help="Bedrock: the Region (default: boto3's)")
    llm.add_argument(
        "--bedrock-endpoint-url", type=_HTTP, help="Bedrock: another endpoint (probe serve: http://HOST:PORT)"
    )
    llm.add_argument(
        "--max-tokens",
        type=whole(0, 1_000_000, "tokens"),
        default=200,
        help="the longest reply (0: none sent, for models that refuse max_tokens)",
    )
    llm.add_argument("--system", default=SYSTEM_PROMPT, help="the system prompt")
    tts = turn.add_argument_group("text to speech (Sonic)")
    tts.add_argument("--route", choices=sorted(ROUTES), required=True)
    tts.add_argument(
        "--tts-url",
        type=url("ws", "wss", example="ws://HOST:PORT/tts/websocket"),
        help="ecs: the WebSocket URL, ws(s)://HOST:PORT/tts/websocket",
    )
    tts.add_argument("--model-id", default=DEFAULT_MODEL_ID, help="ecs: model_id")
    tts.add_argument("--cartesia-version", default=DEFAULT_CARTESIA_VERSION, help="ecs: Cartesia-Version")
    tts.add_argument(
        "--ca-bundle",
        type=ca_bundle_argument,
        metavar="FILE",
        help="ecs over wss:// with a private CA: trust the CA certificates in this PEM file (the TTS only)",
    )
    tts.add_argument("--endpoint", type=ENDPOINT_NAME, help="sagemaker: the endpoint's name")
    tts.add_argument("--region", type=REGION_NAME, help="sagemaker: the endpoint's Region")
    tts.add_argument(
        "--endpoint-url",
        type=_HTTP,
        help="sagemaker: another runtime endpoint (probe serve: http://HOST:PORT)",
    )
    tts.add_argument("--voice-id", default=DEFAULT_VOICE_ID)
    caller = turn.add_argument_group("caller audio")
    caller.add_argument(
        "--audio",
        choices=tuple(SHIPPED),
        default="telephony",
        help="the shipped utterances: telephony (8 kHz mu-law) or wideband (16 kHz PCM)",
    )
    caller.add_argument(
        "--wav",
        type=input_file("a WAV file", text=False, largest=MAX_WAV_BYTES),
        action="append",
        help="your own utterance instead (repeatable, in order)",
    )
    caller.add_argument(
        "--frame-ms", type=int, choices=(10, 20, 40, 50, 100), default=20, help="audio per message"
    )
    load = turn.add_argument_group("load")
    load.add_argument(
        "--concurrency", type=whole(1, MAX_CONCURRENCY, "calls"), default=1, help="closed loop: calls at once"
    )
    load.add_argument("--calls", type=_count, help="closed loop: calls in all (default: --concurrency)")
    load.add_argument(
        "--rate",
        type=real(0, MAX_RATE, "calls a second", low_open=True),
        help="open loop instead: calls arriving per second (Poisson)",
    )
    load.add_argument(
        "--ramp-up",
        type=real(0, MAX_SECONDS, "seconds"),
        default=2.0,
        help="closed loop: start the calls evenly over this many seconds",
    )
    load.add_argument(
        "--duration",
        type=real(0, MAX_SECONDS, "seconds", low_open=True),
        default=60.0,
        help="open loop: seconds of arrivals",
    )
    load.add_argument(
        "--turns",
        type=whole(1, 100_000, "turns"),
        default=3,
        help="turns per call, on the call's connections",
    )
    load.add_argument(
        "--warmup-turns",
        type=whole(0, 100_000, "turns"),
        default=1,
        help="turns of each call not counted (connections warm)",
    )
    load.add_argument("--gap-ms", type=_MS, default=500.0, help="the caller's pause after the reply ends")
    load.add_argument("--seed", type=whole(-(2**63), 2**63 - 1, "a seed"), default=1)
    out = turn.add_argument_group("measurement and output")
    out.add_argument(
        "--stt-timeout", type=_TIMEOUT, default=10.0, help="seconds from speech end to the final"
    )
    out.add_argument(
        "--reply-timeout", type=_TIMEOUT, default=60.0, help="seconds from the final to the reply's end"
    )
    out.add_argument(
        "--audible-threshold-db",
        type=real(-200, 0, "a level in dBFS, at most 0 (full scale)"),
        default=-40.0,
        help="first audible sample: at or above this dBFS",
    )
    out.add_argument(
        "--budget",
        type=input_file("a latency budget (TOML)"),
        default=DEFAULT_BUDGET,
        help="the latency budget to judge the run against",
    )
    out.add_argument(
        "--out", type=output_folder("the run"), help="output folder (default: probe-runs/turn-ROUTE-TIME)"
    )
    out.add_argument("--no-plot", action="store_true", help="no waterfall.png")
    out.add_argument("--quiet", action="store_true", help="no live progress line")
    in_vpc_arguments.add_options(turn, "--concurrency 40 at 32 streams a task: 2 tasks")
    turn.set_defaults(func=run_turn, turn_parser=turn, check=_problem, command_parser=turn)


# Options that belong to one choice only, and that choice: given with another, they would be ignored.
_ONLY_WITH = {
    "stt_url": ("stt", "ink"),
    "stt_model": ("stt", "ink"),
    "transcribe_region": ("stt", "transcribe"),
    "transcribe_endpoint_url": ("stt", "transcribe"),
    "language_code": ("stt", "transcribe"),
    "llm_url": ("llm", "openai"),
    "bedrock_region": ("llm", "bedrock"),
    "bedrock_endpoint_url": ("llm", "bedrock"),
}
# The TTS options by the wire they speak: any route speaking it takes them (sonic_deploy.routes).
_ONLY_WITH_WIRE = {
    "tts_url": Wire.CARTESIA,
    "model_id": Wire.CARTESIA,
    "cartesia_version": Wire.CARTESIA,
    "ca_bundle": Wire.CARTESIA,
    "endpoint": Wire.SAGEMAKER,
    "region": Wire.SAGEMAKER,
    "endpoint_url": Wire.SAGEMAKER,
}


def _ignored(args: argparse.Namespace) -> str | None:
    parser: argparse.ArgumentParser = args.turn_parser
    for name, (choice, value) in _ONLY_WITH.items():
        if getattr(args, name) != parser.get_default(name) and getattr(args, choice) != value:
            option, chosen = "--" + name.replace("_", "-"), "--" + choice
            return f"{option} is for {chosen} {value}, not {chosen} {getattr(args, choice)}: drop it"
    for name, wire in _ONLY_WITH_WIRE.items():
        if getattr(args, name) != parser.get_default(name) and ROUTES[args.route].wire is not wire:
            speaking = " or ".join(route for route, info in ROUTES.items() if info.wire is wire)
            option = "--" + name.replace("_", "-")
            return f"{option} is for --route {speaking}, not --route {args.route}: drop it"
    if args.rate is not None:
        for name in ("concurrency", "ramp_up"):
            if getattr(args, name) != parser.get_default(name):
                return (
                    f"--{name.replace('_', '-')} is the closed loop's: with --rate, calls arrive at that rate"
                )
    if args.wav and args.audio != parser.get_default("audio"):
        return "--audio chooses the shipped utterances: with --wav, your files are played instead"
    if args.audible_threshold_db > 0:
        return f"--audible-threshold-db {args.audible_threshold_db:g} is above full scale: give a level <= 0 dBFS, e.g. -40"
    return None


# Cloud services whose keys a task does not hold: in the VPC it has the deployment's CARTESIA_API_KEY (the
# self-hosted route's key, not Cartesia's cloud one) and its role, no OPENAI_API_KEY. The role may call
# Transcribe and Bedrock only where the environment's `[probe] turn_hops` lists them (the stacks grant each
# listed hop, and its VPC endpoint where there is no NAT: constructs/probe_task.py).
CLOUD_STT_HOST, CLOUD_LLM_HOST = "api.cartesia.ai", "api.openai.com"
TURN_HOPS = {"stt": "transcribe", "llm": "bedrock"}  # the option and its choice that a task's role calls


def _in_vpc_hops_problem(args: argparse.Namespace) -> str | None:
    """--in-vpc with a hop the tasks cannot call: every turn would fail."""
    if args.in_vpc is None:
        return None
    fix = (
        'Fix: use --stt transcribe --llm bedrock, with turn_hops = ["transcribe", "bedrock"] under [probe] in '
        "the environment's config and `make deploy`, or an agent's hops inside the VPC"
    )
    if args.stt == "ink" and urlsplit(args.stt_url).hostname == CLOUD_STT_HOST:
        return (
            f"--in-vpc with --stt ink on {CLOUD_STT_HOST}: a task holds the deployment's key, not Cartesia's "
            f"cloud key. {fix}"
        )
    if args.llm == "openai" and args.llm_url and urlsplit(args.llm_url).hostname == CLOUD_LLM_HOST:
        return f"--in-vpc with --llm openai on {CLOUD_LLM_HOST}: a task has no OPENAI_API_KEY. {fix}"
    # A hop given its own endpoint (a stand-in inside the VPC) calls no AWS service: nothing to grant.
    wanted = [
        hop
        for option, hop in TURN_HOPS.items()
        if getattr(args, option) == hop and getattr(args, f"{hop}_endpoint_url") is None
    ]
    if not wanted:
        return None
    from sonic_deploy.config import load_settings, require_config_dir

    require_config_dir(args.config_dir)  # a ConfigError is one line too (cli.checked)
    environment = load_settings(args.config_dir, args.in_vpc).environment
    for hop in wanted:
        region = getattr(args, f"{hop}_region")
        if region is not None and region != environment.region:
            # The grant (Bedrock's inference profiles) and the VPC endpoints are the stack's Region's.
            return (
                f"--in-vpc {args.in_vpc} with --{hop}-region {region}: the probe task reaches {hop} in the stack's "
                f"Region, {environment.region}, only. Fix: drop --{hop}-region (the task's Region is the stack's)"
            )
    granted = environment.probe.turn_hops
    missing = [hop for hop in wanted if hop not in granted]
    if not missing:
        return None
    config_file = args.config_dir / "environments" / f"{args.in_vpc}.toml"
    option = {hop: option for option, hop in TURN_HOPS.items()}[missing[0]]
    fixed = [hop for hop in TURN_HOPS.values() if hop in granted or hop in missing]
    return (
        f"--in-vpc {args.in_vpc} with --{option} {missing[0]}: the probe task has no grant for it, nor its VPC "
        f"an endpoint where there is no NAT (turn_hops = {json.dumps(granted)} under [probe] in {config_file}). "
        f"Fix: turn_hops = "
        f"{json.dumps(fixed)} there, then `make deploy ENV={args.in_vpc} ROUTE={args.route}`"
    )


def _problem(args: argparse.Namespace) -> str | None:
    if (ignored := _ignored(args)) is not None:
        return ignored
    if (in_vpc_problem := in_vpc_arguments.check(args)) is not None:
        return in_vpc_problem
    if (in_vpc_hops := _in_vpc_hops_problem(args)) is not None:
        return in_vpc_hops
    if args.warmup_turns < 0 or args.warmup_turns >= args.turns:
        return f"--warmup-turns {args.warmup_turns} leaves no turn to time of --turns {args.turns}: give 0 to {args.turns - 1}"
    wire = ROUTES[args.route].wire
    if wire is Wire.CARTESIA and not args.tts_url and args.in_vpc is None:
        return f"--route {args.route} needs --tts-url ws(s)://HOST:PORT/tts/websocket (sonic-deploy connect prints it)"
    if wire is Wire.SAGEMAKER and not args.endpoint and args.in_vpc is None:
        return f"--route {args.route} needs --endpoint NAME (sonic-deploy connect prints it)"
    if args.llm == "openai" and not args.llm_url:
        return (
            "--llm openai needs --llm-url, e.g. https://api.openai.com/v1 (probe serve: http://HOST:PORT/v1)"
        )
    if not args.llm_model:
        return "--llm-model is needed: the model's name, or a Bedrock model or inference profile id"
    if args.rate is not None and args.calls is not None:
        return "--calls is the closed loop's: with --rate, calls arrive for --duration"
    if args.rate is None and args.duration != args.turn_parser.get_default("duration"):
        return "--duration is the open loop's: give --rate too, or --calls for a closed loop"
    if args.rate is not None and args.rate * args.duration > MAX_REQUESTS:
        return (
            f"--rate {args.rate:g} for --duration {args.duration:g} s is {args.rate * args.duration:.3g} calls, "
            f"more than {MAX_REQUESTS}. Fix: a lower --rate or a shorter --duration"
        )
    return None


def turn_options(args: argparse.Namespace) -> TurnOptions:
    """A checked command line of `probe turn`, typed."""
    return TurnOptions(
        argv=tuple(getattr(args, "argv", ())),
        stt=args.stt,
        stt_url=args.stt_url,
        stt_model=args.stt_model,
        transcribe_region=args.transcribe_region,
        transcribe_endpoint_url=args.transcribe_endpoint_url,
        language_code=args.language_code,
        llm=args.llm,
        llm_url=args.llm_url,
        llm_model=args.llm_model,
        bedrock_region=args.bedrock_region,
        bedrock_endpoint_url=args.bedrock_endpoint_url,
        max_tokens=args.max_tokens,
        system=args.system,
        route=args.route,
        tts_url=args.tts_url,
        model_id=args.model_id,
        cartesia_version=args.cartesia_version,
        ca_bundle=args.ca_bundle,
        endpoint=args.endpoint,
        region=args.region,
        endpoint_url=args.endpoint_url,
        voice_id=args.voice_id,
        audio=args.audio,
        wav=None if args.wav is None else tuple(args.wav),
        frame_ms=args.frame_ms,
        concurrency=args.concurrency,
        calls=args.calls,
        rate=args.rate,
        ramp_up=args.ramp_up,
        duration=args.duration,
        turns=args.turns,
        warmup_turns=args.warmup_turns,
        gap_ms=args.gap_ms,
        seed=args.seed,
        stt_timeout=args.stt_timeout,
        reply_timeout=args.reply_timeout,
        audible_threshold_db=args.audible_threshold_db,
        budget=args.budget,
        out=args.out,
        no_plot=args.no_plot,
        quiet=args.quiet,
        in_vpc=in_vpc_arguments.options(args),
    )


def run_turn(args: argparse.Namespace) -> int:
    """`probe turn`: the options typed here, at the edge, then the run (command.py)."""
    return command.run_turn(turn_options(args), args.turn_parser)
