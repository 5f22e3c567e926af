"""What a `probe turn` run is made of, from its options: the caller audio, the three hops' clients, the
latency budget, the calls' plan and the load."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from sonic_deploy.audio import AudioFormat
from sonic_deploy.client.turn_hops import LanguageModel, SpeechToText
from sonic_deploy.turn.budget import DEFAULT_BUDGET, Budget, load_budget
from sonic_deploy.turn.call import CallPlan
from sonic_deploy.turn.caller_audio import CallerAudio, CallerAudioError, read_wav, shipped

if TYPE_CHECKING:
    from sonic_deploy.turn.run import Load
    from sonic_deploy.turn.speakers import Speaker


def utterances(args: argparse.Namespace) -> tuple[CallerAudio, ...]:
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


def speech_to_text(args: argparse.Namespace) -> SpeechToText:
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


def language_model(args: argparse.Namespace) -> LanguageModel:
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


def speaker(args: argparse.Namespace, line: CallerAudio) -> Speaker:
    from sonic_deploy.turn.speakers import SageMakerSpeaker, Voice, WebSocketSpeaker

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


def budget(args: argparse.Namespace) -> Budget | None:
    if args.budget == DEFAULT_BUDGET and not DEFAULT_BUDGET.exists():
        print(
            f"note: {DEFAULT_BUDGET} not found here, so no budget is judged (--budget FILE)", file=sys.stderr
        )
        return None
    return load_budget(args.budget)


def plan_and_load(args: argparse.Namespace, utterances: tuple[CallerAudio, ...]) -> tuple[CallPlan, Load]:
    from sonic_deploy.turn.run import Load

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
