"""What a `probe turn` run is made of, from its options: the caller audio, the three hops' clients, the
latency budget, the calls' plan and the load."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from sonic_deploy.audio import AudioFormat
from sonic_deploy.client.turn_hops import LanguageModel, SpeechToText
from sonic_deploy.routes import ROUTES, Wire
from sonic_deploy.turn.budget import DEFAULT_BUDGET, Budget, load_budget
from sonic_deploy.turn.call import CallPlan
from sonic_deploy.turn.caller_audio import CallerAudio, CallerAudioError, read_wav, shipped
from sonic_deploy.turn.options import TurnOptions

if TYPE_CHECKING:
    from sonic_deploy.turn.run import Load
    from sonic_deploy.turn.speakers import Speaker


def utterances(options: TurnOptions) -> tuple[CallerAudio, ...]:
    audio = [read_wav(path) for path in options.wav] if options.wav else shipped(options.audio)
    first = audio[0]
    for other in audio[1:]:
        if (other.encoding, other.sample_rate) != (first.encoding, first.sample_rate):
            raise CallerAudioError(
                f"{other.name}: {other.encoding} at {other.sample_rate} Hz, but {first.name} is {first.encoding} at "
                f"{first.sample_rate} Hz: one call is one line. Fix: convert them alike (sox IN -r 8000 -e u-law OUT.wav)"
            )
    if first.sample_rate * options.frame_ms % 1000:
        raise CallerAudioError(
            f"{first.name}: {first.sample_rate} Hz does not cut into whole samples of --frame-ms {options.frame_ms}. "
            f"Fix: another --frame-ms, or resample it (sox IN -r 16000 OUT.wav)"
        )
    return tuple(audio)


def speech_to_text(options: TurnOptions) -> SpeechToText:
    if options.stt == "ink":
        from sonic_deploy.client.ink import InkClient

        # Cartesia's cloud key for Ink, which is not the ECS deployment's own key (CARTESIA_API_KEY).
        key = os.environ.get("CARTESIA_STT_API_KEY") or os.environ.get("CARTESIA_API_KEY")
        return InkClient(options.stt_url, api_key=key, model=options.stt_model)
    from sonic_deploy.client.transcribe import TranscribeClient

    return TranscribeClient(
        region=options.transcribe_region,
        language_code=options.language_code,
        endpoint_url=options.transcribe_endpoint_url,
    )


def language_model(options: TurnOptions) -> LanguageModel:
    if options.llm == "openai":
        from sonic_deploy.client.openai_chat import OpenAIChatClient

        assert options.llm_url is not None  # --llm openai needs it (arguments.py)
        return OpenAIChatClient(
            options.llm_url,
            model=options.llm_model,
            api_key=os.environ.get("OPENAI_API_KEY"),
            max_tokens=options.max_tokens,
        )
    from sonic_deploy.client.bedrock import BedrockClient

    return BedrockClient(
        options.llm_model,
        region=options.bedrock_region,
        endpoint_url=options.bedrock_endpoint_url,
        max_tokens=options.max_tokens,
    )


def speaker(options: TurnOptions, line: CallerAudio) -> Speaker:
    from sonic_deploy.turn.speakers import SageMakerSpeaker, Voice, WebSocketSpeaker

    # The reply goes back down the same line: the caller's encoding and rate.
    voice = Voice(
        options.voice_id,
        AudioFormat(line.encoding, line.sample_rate),
        options.audible_threshold_db,
    )
    if ROUTES[options.route].wire is Wire.CARTESIA:
        from sonic_deploy.client.trust import ca_context
        from sonic_deploy.client.websocket import WebSocketClient

        assert options.tts_url is not None  # given, or the stack's with --in-vpc (arguments.py)
        client = WebSocketClient(
            options.tts_url,
            api_key=os.environ.get("CARTESIA_API_KEY", ""),
            model_id=options.model_id,
            cartesia_version=options.cartesia_version,
            ssl_context=None if options.ca_bundle is None else ca_context(options.ca_bundle),
        )
        return WebSocketSpeaker(client, voice)
    from sonic_deploy.client.sagemaker import SageMakerClient

    assert options.endpoint is not None  # given, or the stack's with --in-vpc (arguments.py)
    return SageMakerSpeaker(
        SageMakerClient(options.endpoint, region=options.region, endpoint_url=options.endpoint_url), voice
    )


def budget(options: TurnOptions) -> Budget | None:
    if options.budget == DEFAULT_BUDGET and not DEFAULT_BUDGET.exists():
        print(
            f"note: {DEFAULT_BUDGET} not found here, so no budget is judged (--budget FILE)", file=sys.stderr
        )
        return None
    return load_budget(options.budget)


def plan_and_load(options: TurnOptions, utterances: tuple[CallerAudio, ...]) -> tuple[CallPlan, Load]:
    from sonic_deploy.turn.run import Load

    plan = CallPlan(
        utterances=utterances,
        turns=options.turns,
        warmup_turns=options.warmup_turns,
        frame_ms=options.frame_ms,
        gap_s=options.gap_ms / 1000,
        stt_timeout_s=options.stt_timeout,
        reply_timeout_s=options.reply_timeout,
    )
    load = Load(
        calls=options.calls or options.concurrency,
        concurrency=options.concurrency,
        rate=options.rate,
        duration_s=options.duration,
        seed=options.seed,
        ramp_up_s=options.ramp_up,
    )
    return plan, load
