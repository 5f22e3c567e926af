"""The turn's hops as the agent frameworks measure them, written as the telemetry's hop lines: pipecat's TTFB
metrics from a real pipeline (pipecat's own OpenAI LLM service and ours, against the stand-in's language model
and SageMaker endpoint), and LiveKit's per-message metrics from the events an AgentSession emits."""

from __future__ import annotations

import asyncio
from typing import Any

from livekit.agents import AgentSession, ConversationItemAddedEvent
from livekit.agents.llm import ChatMessage
from pipecat.frames.frames import LLMContextFrame, TTSStoppedFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.openai.llm import OpenAILLMService

from sonic_deploy.client.livekit import report_turn_hops
from sonic_deploy.client.metric_names import LLM_FIRST_TOKEN, STT_FINAL, TTS_FIRST_BYTE
from sonic_deploy.client.pipecat import SonicSageMakerTTSService, TelemetryObserver
from sonic_deploy.client.telemetry import Telemetry
from tests.client.test_telemetry import emf
from tests.pipecat_frames import FrameRecorder, run_worker
from tests.standins.harness import ServerFactory
from tests.standins.real_clients import FAST

VOICE = "a0e99841-438c-4a64-b679-ae501e7d6091"
FIRST_TOKEN_MS = 150


def test_a_pipecat_turn_writes_the_llm_and_tts_hops_pipecat_measured(reference_server: ServerFactory) -> None:
    server = reference_server(*FAST, "--llm-first-token-ms", str(FIRST_TOKEN_MS), "--llm-tokens-per-s", "400")
    lines: list[str] = []
    telemetry = Telemetry("sagemaker", environment="dev", endpoint="sonic-test", write=lines.append)

    async def turn() -> None:
        llm = OpenAILLMService(
            api_key="test", base_url=f"{server.base}/v1", settings=OpenAILLMService.Settings(model="test")
        )
        tts = SonicSageMakerTTSService(
            endpoint_name="sonic-test", region="us-east-2", endpoint_url=server.base, voice_id=VOICE
        )
        downstream = FrameRecorder(FrameDirection.DOWNSTREAM)
        worker = PipelineWorker(
            Pipeline([llm, tts, downstream]),
            params=PipelineParams(audio_out_sample_rate=24000, enable_metrics=True),
            observers=[TelemetryObserver(telemetry)],
            cancel_on_idle_timeout=False,
            enable_rtvi=False,
        )

        async def script() -> None:
            context = LLMContext(messages=[{"role": "user", "content": "Is my table booked?"}])
            await worker.queue_frame(LLMContextFrame(context))
            await downstream.wait_until(lambda: downstream.count(TTSStoppedFrame) >= 1)

        await run_worker(worker, script)

    asyncio.run(turn())
    hops = [document for document in map(emf, lines) if document.get("Framework") == "pipecat"]
    by_hop: dict[str, list[float]] = {}
    for document in hops:
        ((name,),) = [[m["Name"] for m in d["Metrics"]] for d in document["_aws"]["CloudWatchMetrics"]]
        assert (document["Environment"], document["Route"]) == ("dev", "sagemaker")
        by_hop.setdefault(name, []).append(document[name])
    (first_token,) = by_hop[LLM_FIRST_TOKEN]
    assert first_token >= FIRST_TOKEN_MS  # the stand-in never sends the first token early
    assert by_hop[TTS_FIRST_BYTE] and all(ms > 0 for ms in by_hop[TTS_FIRST_BYTE])
    assert STT_FINAL not in by_hop  # no speech-to-text in this pipeline


def test_livekit_s_per_message_metrics_become_hop_lines() -> None:
    """An AgentSession emits conversation_item_added with each message and its metrics (voice/
    agent_activity.py); this needs no model to be one, and no room."""
    lines: list[str] = []
    telemetry = Telemetry("ecs", environment="prod", endpoint="http://nlb", write=lines.append)

    async def session_events() -> None:
        session: AgentSession[Any] = AgentSession()
        report_turn_hops(session, telemetry)
        user = ChatMessage(
            role="user", content=["Is my table booked?"], metrics={"transcription_delay": 0.31}
        )
        reply = ChatMessage(
            role="assistant",
            content=["It is."],
            metrics={"llm_node_ttft": 0.42, "tts_node_ttfb": 0.09, "started_speaking_at": 1.0},
        )
        for message in (user, reply, ChatMessage(role="assistant", content=["No metrics."])):
            session.emit("conversation_item_added", ConversationItemAddedEvent(item=message))

    asyncio.run(session_events())
    documents = [emf(line) for line in lines]
    assert [{k: d[k] for k in d if k in (STT_FINAL, LLM_FIRST_TOKEN, TTS_FIRST_BYTE)} for d in documents] == [
        {STT_FINAL: 310.0},
        {LLM_FIRST_TOKEN: 420.0, TTS_FIRST_BYTE: 90.0},
    ]
    assert {(d["Framework"], d["Route"], d["Environment"]) for d in documents} == {("livekit", "ecs", "prod")}
