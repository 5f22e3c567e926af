"""Clients of Sonic's APIs, as a library (`pip install 'sonic-deploy[client]'`, no aws_cdk): a SageMaker
endpoint's streaming invocations (`SageMakerClient`) and the Cartesia WebSocket API (`cartesia_ws`), which
the probe, the framework services (`client.pipecat`, `client.livekit`) and the turn harness all use.

    from sonic_deploy.client import SageMakerClient

    async with SageMakerClient("sonic-prod", region="us-east-2") as sonic:
        async for chunk in sonic.speak("Hello.", voice=VOICE_ID):
            ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

__all__ = [
    "AccessError",
    "AudioChunk",
    "EndpointUnreachableError",
    "InvalidRequestError",
    "RequestTimeoutError",
    "SageMakerClient",
    "SageMakerError",
    "StreamError",
    "ThrottledError",
]


def __getattr__(name: str) -> Any:
    """The SageMaker client on first use: `import sonic_deploy.client.cartesia_ws` loads no botocore."""
    if name in __all__:
        from sonic_deploy.client import sagemaker

        return getattr(sagemaker, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
