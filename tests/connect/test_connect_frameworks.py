"""The ECS route's settings, as `sonic-deploy connect` prints them, work in the frameworks' own Cartesia
services (pipecat-ai 1.14.0, livekit-plugins-cartesia 1.8.9, unmodified) against `probe serve`: each
snippet is run as printed, with the API key exported under the name connect gives, and speaks a sentence.
The server requires the key, and counts the API version and the model each framework sent.

Over TLS, the server's certificate is signed by a private CA made here: each framework connects when
configured with the CA as connect's TLS instructions say, and fails certificate verification without."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest
from livekit.agents import APIConnectionError, APIConnectOptions, APIStatusError
from livekit.agents.tts import SynthesizedAudio
from livekit.agents.utils import http_context
from livekit.plugins import cartesia
from pipecat.frames.frames import ErrorFrame, Frame, TTSAudioRawFrame, TTSSpeakFrame, TTSStoppedFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.tts_service import TTSService
from pipecat.utils import deprecation
from pipecat.workers.runner import WorkerRunner

from sonic_deploy.cli import main
from tests.conftest import CONFIG_DIR
from tests.pipecat_frames import FrameRecorder
from tests.probe.private_ca import PrivateCa, make_private_ca
from tests.standins.harness import ReferenceServer, ServerFactory
from tests.standins.real_clients import FAST, KEY, RATE, TIMEOUT_S, counted, stream_bytes, wait_for_stats

from .conftest import DEPLOYED_ECS_OUTPUTS, StubbedCloudFormation

pytestmark = pytest.mark.usefixtures("quiet_pipecat")

TEXT = "Hello from the ECS route."
# No retries: the first attempt is the one looked at (LiveKit waits 2 s before each retry).
ONCE = APIConnectOptions(max_retry=0, timeout=TIMEOUT_S)


@pytest.fixture(autouse=True)
def _default_trust(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenSSL's own default store, whatever this machine's environment points it at: it never holds the
    private CA made here."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


def connect_ecs(
    cloudformation: StubbedCloudFormation,
    capsys: pytest.CaptureFixture[str],
    server: ReferenceServer,
    *options: str,
) -> tuple[dict[str, Any], str]:
    """connect's --json settings and its text, for an ECS stack whose ApiUrl is the stand-in."""
    outputs = {**DEPLOYED_ECS_OUTPUTS, "ApiUrl": server.ws_url}
    printed = []
    for output in (["--json"], []):
        cloudformation.deployed("sonic-dev-ecs", outputs)
        argv = ["connect", "--env", "dev", "--route", "ecs", "--config-dir", str(CONFIG_DIR), *options]
        assert main([*argv, *output]) == 0
        printed.append(capsys.readouterr().out)
    return json.loads(printed[0])["settings"], printed[1]


def snippet(text: str, framework: str) -> str:
    """The code block of one framework's section in connect's text."""
    section = text.split(f"## {framework}", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, flags=re.S)
    assert match, f"no code for {framework}"
    return match.group(1)


def run_snippet(code: str) -> dict[str, Any]:
    """The snippet run as printed; its names (`tts`, and the session it may make) are returned."""
    names: dict[str, Any] = {}
    exec(compile(code, "connect-snippet", "exec"), names)
    return names


def exported_key(monkeypatch: pytest.MonkeyPatch, settings: dict[str, Any], value: str = KEY) -> None:
    """What `export CARTESIA_API_KEY="$(aws secretsmanager get-secret-value ...)"` leaves in the agent's
    environment: the secret's value under the name connect printed."""
    monkeypatch.setenv(settings["api_key_env"], value)


def check_server_saw(server: ReferenceServer, settings: dict[str, Any]) -> None:
    stats = wait_for_stats(server, lambda s: s["active"] == 0 and s.get("completed", 0) >= 1)
    assert stats["admitted"] == 1 and stats["completed"] == 1
    assert counted(stats, "auth") == {"x-api-key": 1}, "the key, accepted by a server that requires it"
    assert counted(stats, "version") == {settings["cartesia_version"]: 1}
    assert counted(stats, "model") == {settings["model_id"]: 1}


# pipecat: the service in a real pipeline, [recorder, service, recorder], as tests/probe runs it.


def speak_with_pipecat(service: TTSService) -> tuple[list[TTSAudioRawFrame], list[str]]:
    """Speak TEXT; the audio frames, and the errors pushed upstream. Ends at the first error or at the end
    of the utterance (TTSStoppedFrame), then cancels the pipeline (nothing after it is looked at)."""

    async def run() -> tuple[list[TTSAudioRawFrame], list[str]]:
        upstream, downstream = (
            FrameRecorder(FrameDirection.UPSTREAM),
            FrameRecorder(FrameDirection.DOWNSTREAM),
        )
        worker = PipelineWorker(
            Pipeline([upstream, service, downstream]),
            params=PipelineParams(audio_out_sample_rate=RATE),
            cancel_on_idle_timeout=False,
        )
        started = asyncio.Event()

        async def _started(worker: PipelineWorker, frame: Frame) -> None:
            started.set()

        worker.add_event_handler("on_pipeline_started", _started)

        def ended() -> bool:
            return any(isinstance(f, ErrorFrame) for f in upstream.frames) or any(
                isinstance(f, TTSStoppedFrame) for f in downstream.frames
            )

        async def drive() -> None:
            try:
                await asyncio.wait_for(started.wait(), TIMEOUT_S)
                await worker.queue_frame(TTSSpeakFrame(TEXT))
                while not ended():
                    upstream.arrived.clear()
                    downstream.arrived.clear()
                    waits = [asyncio.ensure_future(r.arrived.wait()) for r in (upstream, downstream)]
                    _, pending = await asyncio.wait(waits, timeout=TIMEOUT_S, return_when="FIRST_COMPLETED")
                    for wait in pending:
                        wait.cancel()
            finally:
                await worker.cancel()

        runner = WorkerRunner(handle_sigint=False)
        await runner.add_workers(worker)
        await asyncio.wait_for(asyncio.gather(runner.run(), drive()), 2 * TIMEOUT_S)
        audio = [f for f in downstream.frames if isinstance(f, TTSAudioRawFrame)]
        return audio, [f.error for f in upstream.frames if isinstance(f, ErrorFrame)]

    return asyncio.run(run())


def pipecat_service(code: str) -> TTSService:
    # pipecat warns once per call site and process; its docs say a test clears the record first.
    deprecation._warned_sites.clear()
    with pytest.warns(DeprecationWarning, match="cartesia_version"):  # as the snippet's comment says
        service = run_snippet(code)["tts"]
    assert isinstance(service, TTSService)
    return service


def test_pipecat_speaks_with_the_settings_as_printed(
    cloudformation: StubbedCloudFormation,
    capsys: pytest.CaptureFixture[str],
    reference_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = reference_server(*FAST)  # requires KEY
    settings, text = connect_ecs(cloudformation, capsys, server, "--framework", "pipecat")
    code = snippet(text, "pipecat")
    assert f'url="{settings["websocket_url"]}"' in code and f'model="{settings["model_id"]}"' in code
    exported_key(monkeypatch, settings)
    audio, errors = speak_with_pipecat(pipecat_service(code))
    assert errors == []
    assert sum(len(frame.audio) for frame in audio) == stream_bytes(TEXT.strip())
    check_server_saw(server, settings)


# LiveKit: outside a job, so in LiveKit's own http context (what a worker gives each job).


def speak_with_livekit(make: Callable[[], dict[str, Any]]) -> list[SynthesizedAudio]:
    """Speak TEXT as one stream with the `tts` that `make()` returns (called on the event loop, in an http
    context, as in a job's entrypoint), then close it and the session it made, if any (`cartesia_http`)."""

    async def run() -> list[SynthesizedAudio]:
        async with http_context.open():
            names = make()
            tts: cartesia.TTS = names["tts"]
            session: aiohttp.ClientSession | None = names.get("cartesia_http")
            try:
                stream = tts.stream(conn_options=ONCE)
                stream.push_text(TEXT)
                stream.end_input()
                try:
                    return [event async for event in stream]
                finally:
                    await stream.aclose()
            finally:
                await tts.aclose()
                if session is not None:
                    await session.close()

    return asyncio.run(asyncio.wait_for(run(), 2 * TIMEOUT_S))


def livekit_audio_bytes(events: list[SynthesizedAudio]) -> int:
    return sum(event.frame.data.nbytes for event in events)


# LiveKit ends each stream with a final frame; with no audio left for it, it is 10 ms of silence of its own.
LIVEKIT_MARKER = RATE // 100 * 2


def test_livekit_speaks_with_the_settings_as_printed(
    cloudformation: StubbedCloudFormation,
    capsys: pytest.CaptureFixture[str],
    reference_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = reference_server(*FAST)
    settings, text = connect_ecs(cloudformation, capsys, server, "--framework", "livekit")
    code = snippet(text, "LiveKit")
    assert f'base_url="{settings["http_base_url"]}"' in code and "http_session" not in code
    exported_key(monkeypatch, settings)
    events = speak_with_livekit(lambda: run_snippet(code))
    assert events and events[-1].is_final
    assert livekit_audio_bytes(events) - stream_bytes(TEXT + " ") in (0, LIVEKIT_MARKER)
    check_server_saw(server, settings)


def test_another_key_than_the_secrets_is_refused(
    cloudformation: StubbedCloudFormation,
    capsys: pytest.CaptureFixture[str],
    reference_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The key matters: the same snippet with another value exported is refused at the handshake (401)."""
    server = reference_server(*FAST)
    settings, text = connect_ecs(cloudformation, capsys, server, "--framework", "livekit")
    exported_key(monkeypatch, settings, "sk_not_the_secret")
    with pytest.raises(APIStatusError) as refused:
        speak_with_livekit(lambda: run_snippet(snippet(text, "LiveKit")))
    assert refused.value.status_code == 401
    assert server.stats()["auth:x-api-key"] == 1 and "admitted" not in server.stats()


# TLS with a private CA.


@pytest.fixture
def tls_server(tmp_path: Any, reference_server: ServerFactory) -> tuple[ReferenceServer, PrivateCa]:
    ca = make_private_ca(tmp_path)
    server = reference_server(*FAST, "--tls-cert", str(ca.cert), "--tls-key", str(ca.key), ca_file=ca.ca)
    assert server.ws_url.startswith("wss://127.0.0.1:")
    return server, ca


def test_pipecat_over_tls_trusts_the_ca_through_ssl_cert_file(
    cloudformation: StubbedCloudFormation,
    capsys: pytest.CaptureFixture[str],
    tls_server: tuple[ReferenceServer, PrivateCa],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, ca = tls_server
    settings, text = connect_ecs(cloudformation, capsys, server, "--ca-bundle", str(ca.ca))
    assert settings["tls"] is True and settings["ca_bundle"] == str(ca.ca)
    assert f"  export SSL_CERT_FILE={ca.ca}\n" in text
    exported_key(monkeypatch, settings)
    code = snippet(text, "pipecat")

    # Without the CA: OpenSSL's default store, and the handshake's verification fails.
    audio, errors = speak_with_pipecat(pipecat_service(code))
    assert audio == [] and errors and "CERTIFICATE_VERIFY_FAILED" in errors[0]

    # As printed: SSL_CERT_FILE exported before the agent starts (websockets reads the default store at
    # each connection, so setting it here, before the pipeline starts, is the same).
    monkeypatch.setenv("SSL_CERT_FILE", str(ca.ca))
    audio, errors = speak_with_pipecat(pipecat_service(code))
    assert errors == [] and sum(len(frame.audio) for frame in audio) == stream_bytes(TEXT)
    check_server_saw(server, settings)


def test_livekit_over_tls_trusts_the_ca_through_its_session(
    cloudformation: StubbedCloudFormation,
    capsys: pytest.CaptureFixture[str],
    tls_server: tuple[ReferenceServer, PrivateCa],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, ca = tls_server
    settings, text = connect_ecs(cloudformation, capsys, server, "--ca-bundle", str(ca.ca))
    exported_key(monkeypatch, settings)
    code = snippet(text, "LiveKit")
    assert f'cafile="{ca.ca}"' in code

    # Without the CA (the plain snippet, LiveKit's own session): the certificate is refused.
    def without_ca() -> dict[str, Any]:
        tts = cartesia.TTS(
            base_url=settings["http_base_url"],
            api_key=KEY,
            model=settings["model_id"],
            api_version=settings["cartesia_version"],
        )
        return {"tts": tts}

    with pytest.raises(APIConnectionError, match="ClientConnectorCertificateError"):
        speak_with_livekit(without_ca)

    events = speak_with_livekit(lambda: run_snippet(code))
    assert livekit_audio_bytes(events) - stream_bytes(TEXT + " ") in (0, LIVEKIT_MARKER)
    check_server_saw(server, settings)


def test_the_client_speaks_with_the_settings_as_printed(
    cloudformation: StubbedCloudFormation,
    capsys: pytest.CaptureFixture[str],
    reference_server: ServerFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """This project's WebSocket client, without a framework: the snippet runs its utterance to the end."""
    server = reference_server(*FAST)
    settings, text = connect_ecs(cloudformation, capsys, server)
    code = snippet(text, "Without a framework")
    assert f'"{settings["websocket_url"]}"' in code and f'model_id="{settings["model_id"]}"' in code
    exported_key(monkeypatch, settings)
    run_snippet(code)  # asyncio.run(main()) as printed
    check_server_saw(server, settings)
