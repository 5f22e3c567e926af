"""Clients of Sonic's APIs, as a library (`pip install 'sonic-deploy[client]'`, no aws_cdk): a SageMaker
endpoint's streaming invocations (`SageMakerClient`) and the Cartesia WebSocket API (`WebSocketClient`,
over `cartesia_ws`), with one family of typed errors (`errors`); and a turn's speech-to-text hop, Cartesia
Ink (`InkClient`) and Amazon Transcribe (`TranscribeClient`), both `turn_hops.SpeechToText`. The probe and the framework services
(`client.pipecat`, `client.livekit`) run on the same code.

    from sonic_deploy.client import SageMakerClient

    async with SageMakerClient("sonic-prod", region="us-east-2") as sonic:
        async for chunk in sonic.speak("Hello.", voice=VOICE_ID):
            ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sonic_deploy.client.errors import SonicError
    from sonic_deploy.client.ink import InkClient
    from sonic_deploy.client.sagemaker import (
        AccessError,
        AudioChunk,
        EndpointUnreachableError,
        InvalidRequestError,
        RequestTimeoutError,
        SageMakerClient,
        SageMakerError,
        StreamError,
        ThrottledError,
    )
    from sonic_deploy.client.transcribe import TranscribeClient
    from sonic_deploy.client.websocket import WebSocketClient

__all__ = [
    "AccessError",
    "AudioChunk",
    "EndpointUnreachableError",
    "InkClient",
    "InvalidRequestError",
    "RequestTimeoutError",
    "SageMakerClient",
    "SageMakerError",
    "SonicError",
    "StreamError",
    "ThrottledError",
    "TranscribeClient",
    "WebSocketClient",
]


def __getattr__(name: str) -> Any:
    """Each client on first use: `from sonic_deploy.client import WebSocketClient` loads no botocore."""
    if name == "WebSocketClient":
        from sonic_deploy.client import websocket

        return websocket.WebSocketClient
    if name == "InkClient":
        from sonic_deploy.client import ink

        return ink.InkClient
    if name == "TranscribeClient":
        from sonic_deploy.client import transcribe

        return transcribe.TranscribeClient
    if name in __all__:
        from sonic_deploy.client import errors

        if hasattr(errors, name):  # no botocore or aiohttp for the errors alone
            return getattr(errors, name)
        from sonic_deploy.client import sagemaker

        return getattr(sagemaker, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
