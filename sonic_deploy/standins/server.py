"""`sonic-deploy probe serve`: a local stand-in for the Cartesia API and for SageMaker's streaming invocation.

It measures the probe and the clients, not Sonic: every delay is one it was told to make. It follows the
Cartesia API as the official SDK describes it (sonic_deploy/client/cartesia_api.py names the files), and
the SageMaker route as docs/probe.md says:
- `GET /tts/websocket`: contexts multiplexed on one socket; a context continued over several messages
  (`continue: true`, then `continue: false`) is one audio stream with one `done`; `flush: true` answers
  `flush_done`; `{"context_id", "cancel": true}` stops a context's audio; word timestamps when asked.
- `POST /tts/bytes` (raw or WAV) and `POST /tts/sse` (server-sent events).
- `POST /endpoints/{name}/invocations-response-stream`: SageMaker's `InvokeEndpointWithResponseStream`,
  newline-terminated JSON in AWS event-stream frames that boto3 parses; one request per utterance.
- The turn's other hops (`llm`, `bedrock`, `stt`): `POST /v1/chat/completions`, Cartesia Ink's
  `GET /stt/turns/websocket` and Amazon Transcribe's `GET /stream-transcription-websocket`.
With a certificate and key (`--tls-cert`, `--tls-key`), all of it over TLS: https:// and wss://.
Credentials: `X-API-Key`, `Authorization: Bearer`, or `?api_key=`; the API version (`Cartesia-Version`
or `?cartesia_version=`) and the credential form of each request, and the `model_id` of each stream, are
counted in `GET /stats`.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import ssl
from collections.abc import Callable

from aiohttp import web

from sonic_deploy.standins.bedrock import converse, converse_stream
from sonic_deploy.standins.cartesia_http import tts_bytes, tts_sse
from sonic_deploy.standins.cartesia_ws import tts_websocket
from sonic_deploy.standins.llm import LlmConfig, chat_completions
from sonic_deploy.standins.reference_stream import ReferenceBehaviour, ServerConfig
from sonic_deploy.standins.sagemaker import invocations_response_stream
from sonic_deploy.standins.shared import STANDINS, Standins, http_error
from sonic_deploy.standins.stt import TRANSCRIPT, SttConfig, ink_turns, transcribe_stream

Control = Callable[[list[str]], ServerConfig]
"""Turns `POST /control`'s options into the server's new config; raises ValueError, naming the option."""
_CONTROL: web.AppKey[Control] = web.AppKey("control")


async def _status(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def _stats(request: web.Request) -> web.Response:
    behaviour = request.app[STANDINS].behaviour
    body = {"active": behaviour.active, **behaviour.counts, "first_byte_lateness_ms": behaviour.lateness_ms()}
    return web.json_response(body)


def _standins(config: ServerConfig) -> Standins:
    return Standins(
        ReferenceBehaviour(config),
        LlmConfig(config.llm_first_token_ms, config.llm_tokens_per_s),
        SttConfig(config.stt_final_ms, config.stt_transcript or TRANSCRIPT, config.api_key),
    )


async def _control(request: web.Request) -> web.Response:
    """`{"options": [...]}`: from now on, do what `probe serve` with these options would, from zero counts
    (a test harness's reset between tests, instead of a new process each)."""
    try:
        body = await request.json()
        options = body["options"]
        if not (isinstance(options, list) and all(isinstance(option, str) for option in options)):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        return http_error(
            400, 'the body must be {"options": [...]}, a list of probe serve options as strings'
        )
    try:
        config = request.app[_CONTROL](options)
    except ValueError as error:
        return http_error(400, str(error))
    standins, new = request.app[STANDINS], _standins(config)
    standins.behaviour, standins.llm, standins.stt = new.behaviour, new.llm, new.stt
    return web.json_response({"ok": True})


def build_app(config: ServerConfig, control: Control | None = None) -> web.Application:
    """`control`: also serve `POST /control` (`_control`), its options read by this function."""
    app = web.Application(client_max_size=1 << 20)
    app[STANDINS] = _standins(config)
    if control is not None:
        app[_CONTROL] = control
        app.router.add_post("/control", _control)
    app.router.add_get("/status", _status)
    app.router.add_get("/stats", _stats)
    app.router.add_get("/tts/websocket", tts_websocket)
    app.router.add_post("/tts/bytes", tts_bytes)
    app.router.add_post("/tts/sse", tts_sse)
    app.router.add_post("/endpoints/{name}/invocations-response-stream", invocations_response_stream)
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/model/{model_id}/converse-stream", converse_stream)
    app.router.add_post("/model/{model_id}/converse", converse)
    app.router.add_get("/stt/turns/websocket", ink_turns)
    app.router.add_get("/stream-transcription-websocket", transcribe_stream)
    return app


def tls_context(config: ServerConfig) -> ssl.SSLContext | None:
    """The server side of TLS for `tls_cert` and `tls_key`, or None for plain HTTP. Raises OSError for a
    file it cannot read, ssl.SSLError for one that is not a PEM certificate chain or its key."""
    if config.tls_cert is None or config.tls_key is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    # An encrypted key is refused rather than prompted for: the server runs unattended.
    context.load_cert_chain(config.tls_cert, config.tls_key, password=lambda: b"")
    return context


async def serve(config: ServerConfig, control: Control | None = None) -> None:
    """Serve until SIGINT/SIGTERM or `exit_after_s`; print the bound address first (tests read it):
    `listening on http://HOST:PORT`, or https:// with TLS (then its WebSocket is wss://)."""
    runner = web.AppRunner(build_app(config, control), access_log=None, handle_signals=False)
    await runner.setup()
    tls = tls_context(config)
    site = web.TCPSite(runner, config.host, config.port, backlog=1024, reuse_address=True, ssl_context=tls)
    await site.start()
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    port = sockets[0].getsockname()[1] if sockets else config.port
    print(f"listening on {'https' if tls else 'http'}://{config.host}:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=config.exit_after_s)
    await runner.cleanup()
