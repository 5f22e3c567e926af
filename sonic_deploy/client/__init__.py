"""Clients of Sonic's APIs, as a library (`pip install 'sonic-deploy[client]'`, no aws_cdk): a SageMaker
endpoint's streaming invocations (`SageMakerClient`) and the Cartesia WebSocket API (`WebSocketClient`,
over `cartesia_ws`), with one family of typed errors (`errors`); and a voice agent's other hops
(`turn_hops`): speech to text on Cartesia Ink (`InkClient`) or Amazon Transcribe (`TranscribeClient`), a
language model on Amazon Bedrock (`BedrockClient`) or any OpenAI-compatible endpoint (`OpenAIChatClient`).
The probe and the framework services (`client.pipecat`, `client.livekit`) run on the same code.

    from sonic_deploy.client import SageMakerClient

    async with SageMakerClient("sonic-prod", region="us-east-2") as sonic:
        async for chunk in sonic.speak("Hello.", voice=VOICE_ID):
            ...
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sonic_deploy.client.bedrock import BedrockClient
    from sonic_deploy.client.errors import (
        AccessError,
        AudioChunk,
        EndpointUnreachableError,
        InvalidRequestError,
        RequestTimeoutError,
        SonicError,
        StreamError,
        ThrottledError,
    )
    from sonic_deploy.client.ink import InkClient
    from sonic_deploy.client.openai_chat import OpenAIChatClient
    from sonic_deploy.client.sagemaker import SageMakerClient, SageMakerError
    from sonic_deploy.client.transcribe import TranscribeClient
    from sonic_deploy.client.websocket import WebSocketClient

# Where each client lives: loaded on first use, so that `from sonic_deploy.client import WebSocketClient`
# loads no botocore, and the errors alone load neither botocore nor aiohttp.
_HOMES = {
    "BedrockClient": "bedrock",
    "InkClient": "ink",
    "OpenAIChatClient": "openai_chat",
    "SageMakerClient": "sagemaker",
    "SageMakerError": "sagemaker",
    "TranscribeClient": "transcribe",
    "WebSocketClient": "websocket",
}
__all__ = [
    "AccessError",
    "AudioChunk",
    "BedrockClient",
    "EndpointUnreachableError",
    "InkClient",
    "InvalidRequestError",
    "OpenAIChatClient",
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
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"sonic_deploy.client.{_HOMES.get(name, 'errors')}")
    return getattr(module, name)
