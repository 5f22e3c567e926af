"""`sonic-deploy probe turn`: the run from its typed options, here, from the tasks of `--in-vpc ENV` or as one
of them, and what it prints."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from sonic_deploy.in_vpc import session as in_vpc
from sonic_deploy.in_vpc.options import InVpcTask
from sonic_deploy.routes import ROUTES, Wire
from sonic_deploy.routes.ecs import outputs as ecs_outputs
from sonic_deploy.routes.sagemaker import outputs as sagemaker_outputs
from sonic_deploy.turn import build
from sonic_deploy.turn.budget import BudgetError
from sonic_deploy.turn.call import Hops
from sonic_deploy.turn.caller_audio import CallerAudio, CallerAudioError
from sonic_deploy.turn.options import TurnOptions


def _in_vpc_session(options: TurnOptions, parser: argparse.ArgumentParser) -> in_vpc.Session:
    """`probe turn --in-vpc ENV`: the --route's stack; the TTS options default to its outputs."""
    from sonic_deploy.connect.deployment import api_urls

    def defaults(deployment: in_vpc.ProbeDeployment) -> dict[str, str]:
        out = deployment.outputs
        if ROUTES[options.route].wire is Wire.SAGEMAKER:
            return {
                "--endpoint": out[sagemaker_outputs.ENDPOINT_NAME],
                "--region": out[sagemaker_outputs.REGION],
            }
        return {
            "--tts-url": api_urls(out[ecs_outputs.API_URL], deployment.stack_name)[0],
            "--model-id": out[ecs_outputs.MODEL_ID],
            "--cartesia-version": out[ecs_outputs.CARTESIA_VERSION],
        }

    label = None
    if options.rate is None:
        load: tuple[int | None, float | None] = (options.concurrency, None)
    else:
        # An open loop's calls at once, not its arrivals a second, are what a task's streams hold: a call
        # lasts its turns (speech, reply, gap), so --rate 5 is some 100 calls at once (Little's law).
        try:
            call_s = _call_s(options, build.utterances(options))
        except CallerAudioError as error:
            raise in_vpc.InVpcError(str(error)) from None
        at_once = math.ceil(options.rate * call_s)
        load = (at_once, None)
        label = f"--rate {options.rate:g} calls/s x ~{call_s:.0f} s a call (~{at_once} calls at once)"
    argv = list(options.argv)
    at = argv.index("turn", argv.index("probe") + 1) + 1
    return in_vpc.prepare(
        options.in_vpc, None, parser, argv[at:], argv[:at], [options.route], load, defaults, label
    )


# A reply's length for sizing only (the model's answer and its speech): a few seconds, as the budget's turn
# (config/turn_budget.toml) plus a spoken sentence.
REPLY_ESTIMATE_S = 4.0


def _call_s(options: TurnOptions, utterances: tuple[CallerAudio, ...]) -> float:
    """A call's estimated length: each turn's speech, reply and the caller's gap."""
    speech = sum(item.duration_s for item in utterances) / len(utterances)
    return float(options.turns * (speech + REPLY_ESTIMATE_S + options.gap_ms / 1000))


def _calls_s(options: TurnOptions, utterances: tuple[CallerAudio, ...], load: Any) -> float:
    """The longest the turns may take (the runner's deadline for the tasks' results): each call at its
    timeouts (speech, --stt-timeout, --reply-timeout, gap per turn), in a row per slot, or after the last
    arrival."""
    speech = max(item.duration_s for item in utterances)
    call = options.turns * (speech + options.stt_timeout + options.reply_timeout + options.gap_ms / 1000)
    if load.rate is not None:
        return float(load.duration_s + call)
    return float(load.ramp_up_s + math.ceil(load.calls / max(1, load.concurrency)) * call)


def run_turn(options: TurnOptions, parser: argparse.ArgumentParser) -> int:
    """`parser`: the command's, for its usage errors and the options an in-VPC run passes on to its tasks."""
    session: in_vpc.Session | None = None
    if options.in_vpc.environment is not None:
        try:
            session = _in_vpc_session(options, parser)
        except in_vpc.InVpcError as error:
            print(f"sonic-deploy probe turn: {error}", file=sys.stderr)
            return 2
        filled = session.filled  # the TTS options from the stack's outputs, where not given
        options = replace(
            options,
            tts_url=filled.get("tts_url", options.tts_url),
            endpoint=filled.get("endpoint", options.endpoint),
            region=filled.get("region", options.region),
            model_id=filled.get("model_id", options.model_id),
            cartesia_version=filled.get("cartesia_version", options.cartesia_version),
        )
    try:
        utterances = build.utterances(options)
        if options.in_vpc.task is not None:
            return _run_turn_task(options, options.in_vpc.task, utterances)
        budget = build.budget(options)
        if session is None:
            stt, llm = build.speech_to_text(options), build.language_model(options)
            speaker = build.speaker(options, utterances[0])
        # Transcribe takes 16-bit PCM only: the agent decodes the line's mu-law.
        if options.stt == "transcribe":
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

    plan, load = build.plan_and_load(options, utterances)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    out_dir = options.out or Path("probe-runs") / f"turn-{options.route}-{stamp}"
    output = TurnOutput(out_dir, None if options.quiet else sys.stderr)
    failed = False
    interrupted: int | None = None
    # The caller's frames go out on timers: the loop whose timers fire when due (event_loop.py).
    try:
        if session is not None:
            within = _calls_s(options, utterances, load)
            session.run(lambda conversation: _emit_all(conversation.run_turn(within), output))
        else:
            hops = Hops(stt, llm, speaker, options.system or None)
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
        "hops": {
            "stt": options.stt,
            "llm": options.llm,
            "llm_model": options.llm_model,
            "tts": options.route,
        },
        "caller_audio": [item.name for item in utterances],
        "audio": {
            "encoding": utterances[0].encoding,
            "sample_rate": utterances[0].sample_rate,
            "frame_ms": options.frame_ms,
        },
        "load": {**load.describe(), "turns_per_call": options.turns, "warmup_turns": options.warmup_turns},
        **({} if session is None else {"in_vpc": session.describe()}),
    }
    write_summary(out_dir, summary, described)
    print(summary_text(summary))
    if not options.no_plot and summary["ok"]:
        from sonic_deploy.turn.plot import write_waterfall

        title = f"turn: {options.stt} -> {options.llm} ({options.llm_model}) -> Sonic on {options.route}, {summary['ok']} turns"
        print(f"waterfall: {write_waterfall(summary, out_dir / 'waterfall.png', title)}")
    print(f"samples and summary: {out_dir}")
    if interrupted is not None:
        return interrupted
    return 0 if summary["ok"] and not failed else 1


def _emit_all(lines: list[dict[str, Any]], output: Any) -> None:
    for line in sorted(lines, key=lambda item: (item.get("task", 0), item.get("call", 0))):
        output.emit(line)


def _run_turn_task(options: TurnOptions, task: InVpcTask, utterances: tuple[CallerAudio, ...]) -> int:
    """Inside a task: this task's share of the calls, when the runner says, its turns uploaded."""
    import tempfile
    import threading
    import time

    from sonic_deploy.event_loop import precise_loop, steady_collector
    from sonic_deploy.in_vpc.task import command_start, serve
    from sonic_deploy.turn.run import TurnOutput, run

    store, _ = in_vpc.task_store(task)
    stt, llm = build.speech_to_text(options), build.language_model(options)
    speaker = build.speaker(options, utterances[0])
    if options.stt == "transcribe":
        utterances = tuple(item.as_pcm16() for item in utterances)
    plan, load = build.plan_and_load(options, utterances)
    share = load.share(task.index, task.count)

    def run_command(command: dict[str, Any], emit: Any, stop: threading.Event) -> dict[str, Any]:
        start = command_start(command, "turn")  # refused unless a turn, starting within the window
        while (wait := start - time.perf_counter()) > 0 and not stop.is_set():
            time.sleep(min(wait, 0.5))
        began, late_s = time.time(), max(0.0, time.perf_counter() - start)
        with tempfile.TemporaryDirectory() as folder:
            # Each turn to `emit` as it finishes, not at the end: the task's watcher uploads the turns so far
            # as parts while the calls run (serve's _watching), which an interrupted runner collects.
            output = TurnOutput(Path(folder), None, emit)
            hops = Hops(stt, llm, speaker, options.system or None)
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

    return serve(store, task.index, task.count, run_command)
