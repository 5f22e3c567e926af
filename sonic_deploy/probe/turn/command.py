"""`sonic-deploy probe turn`: the turn's hops from the command line, the run, and what it prints."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
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
from sonic_deploy.audio import AudioFormat
from sonic_deploy.client.trust import ca_bundle_argument
from sonic_deploy.client.turn_hops import LanguageModel, SpeechToText
from sonic_deploy.probe.in_vpc import session as in_vpc
from sonic_deploy.probe.requests import DEFAULT_CARTESIA_VERSION, DEFAULT_MODEL_ID, DEFAULT_VOICE_ID
from sonic_deploy.probe.turn.budget import DEFAULT_BUDGET, Budget, BudgetError, load_budget
from sonic_deploy.probe.turn.call import CallPlan, Hops
from sonic_deploy.probe.turn.caller_audio import (
    MAX_WAV_BYTES,
    SHIPPED,
    CallerAudio,
    CallerAudioError,
    read_wav,
    shipped,
)

if TYPE_CHECKING:
    from sonic_deploy.probe.turn.run import Load
    from sonic_deploy.probe.turn.speakers import Speaker

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
    tts.add_argument("--route", choices=("ecs", "sagemaker"), required=True)
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
    in_vpc.add_options(turn, "--concurrency 40 at 32 streams a task: 2 tasks")
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
    "tts_url": ("route", "ecs"),
    "model_id": ("route", "ecs"),
    "cartesia_version": ("route", "ecs"),
    "ca_bundle": ("route", "ecs"),
    "endpoint": ("route", "sagemaker"),
    "region": ("route", "sagemaker"),
    "endpoint_url": ("route", "sagemaker"),
}


def _ignored(args: argparse.Namespace) -> str | None:
    parser: argparse.ArgumentParser = args.turn_parser
    for name, (choice, value) in _ONLY_WITH.items():
        if getattr(args, name) != parser.get_default(name) and getattr(args, choice) != value:
            option, chosen = "--" + name.replace("_", "-"), "--" + choice
            return f"{option} is for {chosen} {value}, not {chosen} {getattr(args, choice)}: drop it"
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
    if (in_vpc_problem := in_vpc.check(args)) is not None:
        return in_vpc_problem
    if (in_vpc_hops := _in_vpc_hops_problem(args)) is not None:
        return in_vpc_hops
    if args.warmup_turns < 0 or args.warmup_turns >= args.turns:
        return f"--warmup-turns {args.warmup_turns} leaves no turn to time of --turns {args.turns}: give 0 to {args.turns - 1}"
    if args.route == "ecs" and not args.tts_url and args.in_vpc is None:
        return "--route ecs needs --tts-url ws(s)://HOST:PORT/tts/websocket (sonic-deploy connect prints it)"
    if args.route == "sagemaker" and not args.endpoint and args.in_vpc is None:
        return "--route sagemaker needs --endpoint NAME (sonic-deploy connect prints it)"
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


def _utterances(args: argparse.Namespace) -> tuple[CallerAudio, ...]:
    audio = [read_wav(path) for path in args.wav] if args.wav else shipped(args.audio)
    first = audio[0]
    for other in audio[1:]:
        if (other.encoding, other.sample_rate) != (first.encoding, first.sample_rate):
            raise CallerAudioError(
                f"{other.name}: {other.encoding} at {other.sample_rate} Hz, but {first.name} is {first.encoding} at "
                f"{first.sample_rate} Hz: one call is one line. Fix: convert them alike (sox IN -r 8000 -e u-law OUT.wav)"
            )
    if first.sample_rate * args.frame_ms % 1000:
        raise CallerAudioError(
            f"{first.name}: {first.sample_rate} Hz does not cut into whole samples of --frame-ms {args.frame_ms}. "
            f"Fix: another --frame-ms, or resample it (sox IN -r 16000 OUT.wav)"
        )
    return tuple(audio)


def _speech_to_text(args: argparse.Namespace) -> SpeechToText:
    if args.stt == "ink":
        from sonic_deploy.client.ink import InkClient

        # Cartesia's cloud key for Ink, which is not the ECS deployment's own key (CARTESIA_API_KEY).
        key = os.environ.get("CARTESIA_STT_API_KEY") or os.environ.get("CARTESIA_API_KEY")
        return InkClient(args.stt_url, api_key=key, model=args.stt_model)
    from sonic_deploy.client.transcribe import TranscribeClient

    return TranscribeClient(
        region=args.transcribe_region,
        language_code=args.language_code,
        endpoint_url=args.transcribe_endpoint_url,
    )


def _language_model(args: argparse.Namespace) -> LanguageModel:
    if args.llm == "openai":
        from sonic_deploy.client.openai_chat import OpenAIChatClient

        return OpenAIChatClient(
            args.llm_url,
            model=args.llm_model,
            api_key=os.environ.get("OPENAI_API_KEY"),
            max_tokens=args.max_tokens,
        )
    from sonic_deploy.client.bedrock import BedrockClient

    return BedrockClient(
        args.llm_model,
        region=args.bedrock_region,
        endpoint_url=args.bedrock_endpoint_url,
        max_tokens=args.max_tokens,
    )


def _speaker(args: argparse.Namespace, line: CallerAudio) -> Speaker:
    from sonic_deploy.probe.turn.speakers import SageMakerSpeaker, Voice, WebSocketSpeaker

    # The reply goes back down the same line: the caller's encoding and rate.
    voice = Voice(
        args.voice_id,
        AudioFormat(line.encoding, line.sample_rate),
        args.audible_threshold_db,
    )
    if args.route == "ecs":
        from sonic_deploy.client.trust import ca_context
        from sonic_deploy.client.websocket import WebSocketClient

        client = WebSocketClient(
            args.tts_url,
            api_key=os.environ.get("CARTESIA_API_KEY", ""),
            model_id=args.model_id,
            cartesia_version=args.cartesia_version,
            ssl_context=None if args.ca_bundle is None else ca_context(args.ca_bundle),
        )
        return WebSocketSpeaker(client, voice)
    from sonic_deploy.client.sagemaker import SageMakerClient

    return SageMakerSpeaker(
        SageMakerClient(args.endpoint, region=args.region, endpoint_url=args.endpoint_url), voice
    )


def _budget(args: argparse.Namespace) -> Budget | None:
    if args.budget == DEFAULT_BUDGET and not DEFAULT_BUDGET.exists():
        print(
            f"note: {DEFAULT_BUDGET} not found here, so no budget is judged (--budget FILE)", file=sys.stderr
        )
        return None
    return load_budget(args.budget)


def _in_vpc_session(args: argparse.Namespace) -> in_vpc.Session:
    """`probe turn --in-vpc ENV`: the --route's stack; the TTS options default to its outputs."""
    from sonic_deploy.connect.deployment import api_urls

    def defaults(deployment: in_vpc.ProbeDeployment) -> dict[str, str]:
        out = deployment.outputs
        if args.route == "sagemaker":
            return {"--endpoint": out["EndpointName"], "--region": out["Region"]}
        return {
            "--tts-url": api_urls(out["ApiUrl"], deployment.stack_name)[0],
            "--model-id": out["ModelId"],
            "--cartesia-version": out["CartesiaVersion"],
        }

    label = None
    if args.rate is None:
        load: tuple[int | None, float | None] = (args.concurrency, None)
    else:
        # An open loop's calls at once, not its arrivals a second, are what a task's streams hold: a call
        # lasts its turns (speech, reply, gap), so --rate 5 is some 100 calls at once (Little's law).
        try:
            call_s = _call_s(args, _utterances(args))
        except CallerAudioError as error:
            raise in_vpc.InVpcError(str(error)) from None
        at_once = math.ceil(args.rate * call_s)
        load = (at_once, None)
        label = f"--rate {args.rate:g} calls/s x ~{call_s:.0f} s a call (~{at_once} calls at once)"
    argv: list[str] = args.argv
    at = argv.index("turn", argv.index("probe") + 1) + 1
    return in_vpc.prepare(args, args.command_parser, argv[at:], argv[:at], args.route, load, defaults, label)


# A reply's length for sizing only (the model's answer and its speech): a few seconds, as the budget's turn
# (config/turn_budget.toml) plus a spoken sentence.
REPLY_ESTIMATE_S = 4.0


def _call_s(args: argparse.Namespace, utterances: tuple[CallerAudio, ...]) -> float:
    """A call's estimated length: each turn's speech, reply and the caller's gap."""
    speech = sum(item.duration_s for item in utterances) / len(utterances)
    return float(args.turns * (speech + REPLY_ESTIMATE_S + args.gap_ms / 1000))


def _calls_s(args: argparse.Namespace, utterances: tuple[CallerAudio, ...], load: Any) -> float:
    """The longest the turns may take (the runner's deadline for the tasks' results): each call at its
    timeouts (speech, --stt-timeout, --reply-timeout, gap per turn), in a row per slot, or after the last
    arrival."""
    speech = max(item.duration_s for item in utterances)
    call = args.turns * (speech + args.stt_timeout + args.reply_timeout + args.gap_ms / 1000)
    if load.rate is not None:
        return float(load.duration_s + call)
    return float(load.ramp_up_s + math.ceil(load.calls / max(1, load.concurrency)) * call)


def run_turn(args: argparse.Namespace) -> int:
    parser: argparse.ArgumentParser = args.turn_parser
    session: in_vpc.Session | None = None
    if args.in_vpc is not None:
        try:
            session = _in_vpc_session(args)
        except in_vpc.InVpcError as error:
            print(f"sonic-deploy probe turn: {error}", file=sys.stderr)
            return 2
    try:
        utterances = _utterances(args)
        if args.in_vpc_task is not None:
            return _run_turn_task(args, utterances)
        budget = _budget(args)
        if session is None:
            stt, llm = _speech_to_text(args), _language_model(args)
            speaker = _speaker(args, utterances[0])
        if args.stt == "transcribe":  # Transcribe takes 16-bit PCM only: the agent decodes the line's mu-law
            utterances = tuple(item.as_pcm16() for item in utterances)
    except (CallerAudioError, BudgetError, ValueError) as error:
        parser.error(str(error))
    except ImportError as error:
        print(
            f"sonic-deploy probe turn: {error.name} is missing: pip install 'sonic-deploy[probe]'",
            file=sys.stderr,
        )
        return 2
    from sonic_deploy.event_loop import precise_loop, steady_collector
    from sonic_deploy.probe.turn.run import TurnOutput, run, summarize, summary_text, write_summary

    plan, load = _plan_and_load(args, utterances)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    out_dir = args.out or Path("probe-runs") / f"turn-{args.route}-{stamp}"
    output = TurnOutput(out_dir, None if args.quiet else sys.stderr)
    failed = False
    interrupted: int | None = None
    # The caller's frames go out on timers: the loop whose timers fire when due (event_loop.py).
    try:
        if session is not None:
            within = _calls_s(args, utterances, load)
            session.run(lambda conversation: _emit_all(conversation.run_turn(within), output))
        else:
            hops = Hops(stt, llm, speaker, args.system or None)
            with steady_collector(), asyncio.Runner(loop_factory=precise_loop) as runner:
                runner.run(run(hops, plan, load, output))
    except KeyboardInterrupt as stop:
        interrupted = stop.exit_code if isinstance(stop, in_vpc.Terminated) else 130
        if (
            session is not None
        ):  # the turns the tasks had uploaded (every PART_EVERY_S, and when told to stop)
            _emit_all(session.partial(), output)
        where = "the turns finished so far are in " + str(out_dir / "samples.jsonl")
        if session is not None:
            where += " (those the tasks had uploaded: they upload every few seconds)"
        print(f"\ninterrupted: {where}", file=sys.stderr)
    except in_vpc.InVpcError as error:
        failed = True
        print(f"sonic-deploy probe turn: {error}", file=sys.stderr)
    finally:
        output.close()
    summary = summarize(output.lines, budget)
    described = {
        "kind": "turn",
        "hops": {"stt": args.stt, "llm": args.llm, "llm_model": args.llm_model, "tts": args.route},
        "caller_audio": [item.name for item in utterances],
        "audio": {
            "encoding": utterances[0].encoding,
            "sample_rate": utterances[0].sample_rate,
            "frame_ms": args.frame_ms,
        },
        "load": {**load.describe(), "turns_per_call": args.turns, "warmup_turns": args.warmup_turns},
        **({} if session is None else {"in_vpc": session.describe()}),
    }
    write_summary(out_dir, summary, described)
    print(summary_text(summary))
    if not args.no_plot and summary["ok"]:
        from sonic_deploy.probe.turn.plot import write_waterfall

        title = f"turn: {args.stt} -> {args.llm} ({args.llm_model}) -> Sonic on {args.route}, {summary['ok']} turns"
        print(f"waterfall: {write_waterfall(summary, out_dir / 'waterfall.png', title)}")
    print(f"samples and summary: {out_dir}")
    if interrupted is not None:
        return interrupted
    return 0 if summary["ok"] and not failed else 1


def _emit_all(lines: list[dict[str, Any]], output: Any) -> None:
    for line in sorted(lines, key=lambda item: (item.get("task", 0), item.get("call", 0))):
        output.emit(line)


def _plan_and_load(args: argparse.Namespace, utterances: tuple[CallerAudio, ...]) -> tuple[CallPlan, Load]:
    from sonic_deploy.probe.turn.run import Load

    plan = CallPlan(
        utterances=utterances,
        turns=args.turns,
        warmup_turns=args.warmup_turns,
        frame_ms=args.frame_ms,
        gap_s=args.gap_ms / 1000,
        stt_timeout_s=args.stt_timeout,
        reply_timeout_s=args.reply_timeout,
    )
    load = Load(
        calls=args.calls or args.concurrency,
        concurrency=args.concurrency,
        rate=args.rate,
        duration_s=args.duration,
        seed=args.seed,
        ramp_up_s=args.ramp_up,
    )
    return plan, load


def _run_turn_task(args: argparse.Namespace, utterances: tuple[CallerAudio, ...]) -> int:
    """Inside a task: this task's share of the calls, when the runner says, its turns uploaded."""
    import tempfile
    import threading
    import time

    from sonic_deploy.event_loop import precise_loop, steady_collector
    from sonic_deploy.probe.in_vpc.task import command_start, serve
    from sonic_deploy.probe.turn.run import TurnOutput, run

    store = in_vpc.task_store(args)
    stt, llm = _speech_to_text(args), _language_model(args)
    speaker = _speaker(args, utterances[0])
    if args.stt == "transcribe":
        utterances = tuple(item.as_pcm16() for item in utterances)
    plan, load = _plan_and_load(args, utterances)
    share = load.share(args.task_index, args.task_count)

    def run_command(command: dict[str, Any], emit: Any, stop: threading.Event) -> dict[str, Any]:
        start = command_start(command, "turn")  # refused unless a turn, starting within the window
        while (wait := start - time.perf_counter()) > 0 and not stop.is_set():
            time.sleep(min(wait, 0.5))
        began, late_s = time.time(), max(0.0, time.perf_counter() - start)
        with tempfile.TemporaryDirectory() as folder:
            # Each turn to `emit` as it finishes, not at the end: the task's watcher uploads the turns so far
            # as parts while the calls run (serve's _watching), which an interrupted runner collects.
            output = TurnOutput(Path(folder), None, emit)
            hops = Hops(stt, llm, speaker, args.system or None)
            try:
                with steady_collector(), asyncio.Runner(loop_factory=precise_loop) as runner:
                    runner.run(run(hops, plan, share, output, stop.is_set))
            finally:
                output.close()
        return {
            "turns": len(output.lines),
            "load": share.describe(),
            "late_s": round(late_s, 3),
            "started_at": round(began, 3),
            "ended_at": round(time.time(), 3),
        }

    return serve(store, args.task_index, args.task_count, run_command)
