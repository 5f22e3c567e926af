"""The clients' telemetry: one embedded-metric-format line a request, as CloudWatch's specification shapes
it, with the figures the stand-in was told to produce (a first byte it delays, audio it paces), and none for
a request its caller left or when telemetry is off."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from sonic_deploy.client import SageMakerClient, ThrottledError, WebSocketClient
from sonic_deploy.client.errors import AudioChunk
from sonic_deploy.client.metric_names import NAMESPACE
from sonic_deploy.client.telemetry import Telemetry
from tests.standins.harness import ServerFactory
from tests.standins.real_clients import KEY

VOICE = "a0e99841-438c-4a64-b679-ae501e7d6091"


def emf(line: str) -> dict[str, Any]:
    """`line` parsed, after the checks CloudWatch makes of an EMF document ("Specification: Embedded metric
    format"): a JSON object with `_aws` (a millisecond Timestamp, CloudWatchMetrics directives), each
    directive's dimensions and metrics members of the root, dimension values strings, metric values numbers."""
    document: dict[str, Any] = json.loads(line)
    metadata = document["_aws"]
    assert isinstance(metadata["Timestamp"], int) and metadata["Timestamp"] > 1_700_000_000_000
    for directive in metadata["CloudWatchMetrics"]:
        assert directive["Namespace"] == NAMESPACE
        for dimension_set in directive["Dimensions"]:
            assert all(isinstance(document[name], str) for name in dimension_set)
        for metric in directive["Metrics"]:
            assert isinstance(document[metric["Name"]], int | float), metric
            assert metric["Unit"] in ("Milliseconds", "Count", "None")
    return document


def test_a_request_is_one_line_with_what_the_caller_got(reference_server: ServerFactory) -> None:
    server = reference_server("--first-byte-ms", "60", "--audio-ms", "400", "--pace", "0.5")
    lines: list[str] = []
    telemetry = Telemetry("sagemaker", environment="dev", endpoint="sonic-test", write=lines.append)

    async def speak() -> list[AudioChunk]:
        async with SageMakerClient(
            "sonic-test", region="us-east-2", endpoint_url=server.base, telemetry=telemetry
        ) as client:
            return [c async for c in client.speak("Hello there.", voice=VOICE)]

    chunks = asyncio.run(speak())
    audio = sum(len(c.data) for c in chunks)
    (line,) = lines
    document = emf(line)
    assert (document["Route"], document["Endpoint"], document["Requests"], document["Errors"]) == (
        "sagemaker",
        "sonic-test",
        1,
        0,
    )
    assert audio == 400 * 48  # 24 kHz, 2 bytes a sample
    assert document["FirstAudio"] >= 60  # the stand-in's delay, from the request's send
    # 400 ms of audio sent at half real time after the first byte: the stream takes >= 60 + 190 ms.
    assert document["StreamTime"] >= 250
    assert document["RealTimeFactor"] == pytest.approx(document["StreamTime"] / 400, abs=0.01)
    # Sent faster than real time, yet a busy machine may still stall a chunk past the audio before it: the
    # count is of the gaps in what this caller received.
    gaps, played_s = 0, 0.0
    for chunk in chunks:
        gaps += chunk is not chunks[0] and chunk.at > chunks[0].at + played_s
        played_s += len(chunk.data) / 48_000
    assert document["Underruns"] == gaps
    assert [d["Dimensions"] for d in document["_aws"]["CloudWatchMetrics"]] == [[["Environment", "Route"]]]
    assert document["Environment"] == "dev"


def test_a_refused_request_is_an_error_of_its_kind(reference_server: ServerFactory) -> None:
    server = reference_server("--api-key", KEY, "--capacity", "0")
    lines: list[str] = []
    telemetry = Telemetry("ecs", environment="dev", endpoint=server.ws_url, write=lines.append)

    async def speak() -> None:
        async with WebSocketClient(
            server.ws_url, api_key=KEY, model_id="sonic-3", telemetry=telemetry
        ) as client:
            async for _ in client.speak("Busy?", voice=VOICE):
                pass

    with pytest.raises(ThrottledError):
        asyncio.run(speak())
    (line,) = lines
    document = emf(line)
    assert (document["Errors"], document["ErrorKind"]) == (1, "error_event_429")
    assert "FirstAudio" not in document  # no audio, no first-audio figure
    assert [d["Dimensions"] for d in document["_aws"]["CloudWatchMetrics"]] == [
        [["Environment", "Route"]],
        [["Environment", "Route", "ErrorKind"]],
    ]


def test_a_request_its_caller_leaves_writes_nothing(reference_server: ServerFactory) -> None:
    server = reference_server("--api-key", KEY, "--first-byte-ms", "5", "--audio-ms", "400", "--pace", "1")
    lines: list[str] = []

    async def speak() -> None:
        telemetry = Telemetry("ecs", environment="dev", endpoint="test", write=lines.append)
        async with WebSocketClient(
            server.ws_url, api_key=KEY, model_id="sonic-3", telemetry=telemetry
        ) as client:
            async for _ in client.speak("Interrupted.", voice=VOICE):
                break  # barge-in: nothing failed, nothing finished
            async for _ in client.speak("Whole.", voice=VOICE):
                pass

    asyncio.run(speak())
    assert [json.loads(line)["Requests"] for line in lines] == [1]


def test_a_chunk_after_the_audio_before_it_played_out_is_an_underrun() -> None:
    lines: list[str] = []
    request = Telemetry("sagemaker", environment="dev", endpoint="e", write=lines.append).request(
        "pcm_s16le", 8000
    )
    second = 16_000  # bytes of one second at 8 kHz
    sent = request.sent_at
    request.chunk(AudioChunk(b"\0" * (second // 10), sent + 0.100))  # 100 ms of audio, first at 100 ms
    request.chunk(AudioChunk(b"\0" * (second // 10), sent + 0.150))  # in time: 100 ms still to play
    request.chunk(AudioChunk(b"\0" * (second // 10), sent + 0.450))  # 200 ms had played out by 300 ms: a gap
    request.end()
    document = emf(lines[0])
    assert (document["FirstAudio"], document["Underruns"], document["StreamTime"]) == (100.0, 1, 450.0)
    assert document["RealTimeFactor"] == 1.5


def test_off_unless_given() -> None:
    assert SageMakerClient("sonic-test", region="us-east-2").telemetry is None


def test_the_framework_services_give_it_to_their_client() -> None:
    from sonic_deploy.client.livekit import SonicSageMakerTTS
    from sonic_deploy.client.pipecat import SonicSageMakerTTSService

    telemetry = Telemetry("sagemaker", environment="dev", endpoint="sonic-test")
    pipecat = SonicSageMakerTTSService(
        endpoint_name="sonic-test", region="us-east-2", voice_id=VOICE, telemetry=telemetry
    )
    livekit = SonicSageMakerTTS(
        endpoint_name="sonic-test", region="us-east-2", voice=VOICE, telemetry=telemetry
    )
    assert pipecat._client.telemetry is telemetry and livekit._client.telemetry is telemetry
    shared = SageMakerClient("sonic-test", region="us-east-2")
    with pytest.raises(ValueError, match="telemetry"):
        SonicSageMakerTTS(client=shared, voice=VOICE, telemetry=telemetry)
