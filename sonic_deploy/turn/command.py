"""`sonic-deploy probe turn`: the run, here or from the tasks of `--in-vpc ENV`, and what it prints."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import math
import sys
from pathlib import Path
from typing import Any

from sonic_deploy.in_vpc import session as in_vpc
from sonic_deploy.turn import build
from sonic_deploy.turn.budget import BudgetError
from sonic_deploy.turn.call import Hops
from sonic_deploy.turn.caller_audio import CallerAudio, CallerAudioError


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
            call_s = _call_s(args, build.utterances(args))
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
        utterances = build.utterances(args)
        if args.in_vpc_task is not None:
            return _run_turn_task(args, utterances)
        budget = build.budget(args)
        if session is None:
            stt, llm = build.speech_to_text(args), build.language_model(args)
            speaker = build.speaker(args, utterances[0])
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
    from sonic_deploy.turn.run import TurnOutput, run, summarize, summary_text, write_summary

    plan, load = build.plan_and_load(args, utterances)
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
        from sonic_deploy.turn.plot import write_waterfall

        title = f"turn: {args.stt} -> {args.llm} ({args.llm_model}) -> Sonic on {args.route}, {summary['ok']} turns"
        print(f"waterfall: {write_waterfall(summary, out_dir / 'waterfall.png', title)}")
    print(f"samples and summary: {out_dir}")
    if interrupted is not None:
        return interrupted
    return 0 if summary["ok"] and not failed else 1


def _emit_all(lines: list[dict[str, Any]], output: Any) -> None:
    for line in sorted(lines, key=lambda item: (item.get("task", 0), item.get("call", 0))):
        output.emit(line)


def _run_turn_task(args: argparse.Namespace, utterances: tuple[CallerAudio, ...]) -> int:
    """Inside a task: this task's share of the calls, when the runner says, its turns uploaded."""
    import tempfile
    import threading
    import time

    from sonic_deploy.event_loop import precise_loop, steady_collector
    from sonic_deploy.in_vpc.task import command_start, serve
    from sonic_deploy.turn.run import TurnOutput, run

    store = in_vpc.task_store(args)
    stt, llm = build.speech_to_text(args), build.language_model(args)
    speaker = build.speaker(args, utterances[0])
    if args.stt == "transcribe":
        utterances = tuple(item.as_pcm16() for item in utterances)
    plan, load = build.plan_and_load(args, utterances)
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
