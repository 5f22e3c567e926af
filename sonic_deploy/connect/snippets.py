"""The code an agent runs to speak through one deployed route, per framework, as copy-pasteable Python.

ECS route: the frameworks' own Cartesia services, as their source has them (pipecat-ai 1.14.0
`pipecat/services/cartesia/tts.py`, livekit-plugins-cartesia 1.8.9 `livekit/plugins/cartesia/tts.py`):
- pipecat's `CartesiaTTSService` takes the full WebSocket `url`; model and voice go in
  `settings=CartesiaTTSService.Settings(...)` (its `model=` and `voice_id=` arguments are deprecated since
  0.0.105). It pins `Cartesia-Version: 2026-03-01`; `cartesia_version=` still overrides it, deprecated
  since 1.8.0 (a DeprecationWarning, removed in 2.0). It opens the socket with `websockets`, and takes no
  TLS setting: a private CA reaches it only through OpenSSL's default store (SSL_CERT_FILE).
- LiveKit's `cartesia.TTS` takes `base_url` (http -> ws by replacing the first "http") and `api_version`
  (`?cartesia_version=` on the socket, a header on HTTP), and an `http_session`, whose connector carries
  the TLS context.
SageMaker route: this project's services (`sonic_deploy.client`), by name and signature; on either route,
without a framework, this project's client.
"""

from __future__ import annotations

import json

from sonic_deploy.connect.deployment import EcsApi, SageMakerEndpoint
from sonic_deploy.probe.requests import DEFAULT_VOICE_ID

PIPECAT_CARTESIA_VERSION = "2026-03-01"
CA_PLACEHOLDER = "/path/to/private-ca.pem"
SAMPLE_RATE = 24000
VOICE_COMMENT = "  # a voice id your deployment serves"

FRAMEWORKS = ("pipecat", "livekit")
TESTED = {
    "pipecat": "pipecat-ai 1.14.0",
    "livekit": "livekit-agents and livekit-plugins-cartesia 1.8.9",
    "client": "this sonic-deploy",
}
ECS_INSTALL = {
    "pipecat": "pip install 'pipecat-ai[cartesia]>=1.14,<2'",
    "livekit": "pip install 'livekit-agents[cartesia]>=1.8.9,<2'",
    "client": "pip install 'sonic-deploy[client]'",
}
SAGEMAKER_INSTALL = {
    "pipecat": "pip install 'sonic-deploy[pipecat]'",
    "livekit": "pip install 'sonic-deploy[livekit]'",
    "client": "pip install 'sonic-deploy[client]'",
}


def _py(value: str) -> str:
    """A Python string literal (double-quoted, as the code around it is written)."""
    return json.dumps(value)


def ca_file(api: EcsApi) -> str:
    return api.ca_bundle or CA_PLACEHOLDER


def pipecat_ecs(api: EcsApi) -> str:
    version = ""
    if api.cartesia_version != PIPECAT_CARTESIA_VERSION:
        version = (
            f"    # The deployment's API version, instead of the {PIPECAT_CARTESIA_VERSION} pipecat pins. The argument\n"
            f"    # is deprecated (a DeprecationWarning): pipecat writes its messages for {PIPECAT_CARTESIA_VERSION}.\n"
            f"    cartesia_version={_py(api.cartesia_version)},\n"
        )
    return (
        "import os\n"
        "\n"
        "from pipecat.services.cartesia.tts import CartesiaTTSService\n"
        "\n"
        "tts = CartesiaTTSService(\n"
        f"    api_key=os.environ[{_py(api.api_key_env)}],\n"
        f"    url={_py(api.websocket_url)},\n"
        f"{version}"
        "    settings=CartesiaTTSService.Settings(\n"
        f"        model={_py(api.model_id)},\n"
        f"        voice={_py(DEFAULT_VOICE_ID)},{VOICE_COMMENT}\n"
        "    ),\n"
        ")\n"
    )


def livekit_ecs(api: EcsApi) -> str:
    arguments = (
        f"    base_url={_py(api.http_base_url)},\n"
        f"    api_key=os.environ[{_py(api.api_key_env)}],\n"
        f"    model={_py(api.model_id)},\n"
        f"    api_version={_py(api.cartesia_version)},\n"
        f"    voice={_py(DEFAULT_VOICE_ID)},{VOICE_COMMENT}\n"
    )
    if not api.tls:
        return f"import os\n\nfrom livekit.plugins import cartesia\n\ntts = cartesia.TTS(\n{arguments})\n"
    return (
        "import os\n"
        "import ssl\n"
        "\n"
        "import aiohttp\n"
        "from livekit.plugins import cartesia\n"
        "\n"
        "# This TTS's connections trust the private CA (and only it); the room's keep the default store.\n"
        "# Make the session in the entrypoint, on the job's event loop, and close it when the job ends:\n"
        "#     ctx.add_shutdown_callback(cartesia_http.close)\n"
        "cartesia_http = aiohttp.ClientSession(\n"
        f"    connector=aiohttp.TCPConnector(ssl=ssl.create_default_context(cafile={_py(ca_file(api))}))\n"
        ")\n"
        "tts = cartesia.TTS(\n"
        f"{arguments}"
        "    http_session=cartesia_http,\n"
        ")\n"
    )


def client_ecs(api: EcsApi) -> str:
    tls = f"        ssl_context=ssl.create_default_context(cafile={_py(ca_file(api))}),\n" if api.tls else ""
    return (
        "import asyncio\n"
        "import os\n" + ("import ssl\n" if api.tls else "") + "\n"
        "from sonic_deploy.client import WebSocketClient\n"
        "\n"
        "\n"
        "async def main() -> None:\n"
        "    async with WebSocketClient(\n"
        f"        {_py(api.websocket_url)},\n"
        f"        api_key=os.environ[{_py(api.api_key_env)}],\n"
        f"        model_id={_py(api.model_id)},\n"
        f"        cartesia_version={_py(api.cartesia_version)},\n"
        f"{tls}"
        "    ) as sonic:\n"
        f'        async for chunk in sonic.speak("Hello from Sonic.", voice={_py(DEFAULT_VOICE_ID)}):\n'
        "            ...  # play or forward each piece of audio as it comes\n"
        "\n"
        "\n"
        "asyncio.run(main())\n"
    )


def pipecat_sagemaker(endpoint: SageMakerEndpoint, region: str) -> str:
    return (
        "from sonic_deploy.client.pipecat import SonicSageMakerTTSService\n"
        "\n"
        "tts = SonicSageMakerTTSService(\n"
        f"    endpoint_name={_py(endpoint.endpoint_name)},\n"
        f"    region={_py(region)},\n"
        f"    voice_id={_py(DEFAULT_VOICE_ID)},{VOICE_COMMENT}\n"
        f"    sample_rate={SAMPLE_RATE},\n"
        ")\n"
    )


def livekit_sagemaker(endpoint: SageMakerEndpoint, region: str) -> str:
    return (
        "from sonic_deploy.client.livekit import SonicSageMakerTTS\n"
        "\n"
        "tts = SonicSageMakerTTS(\n"
        f"    endpoint_name={_py(endpoint.endpoint_name)},\n"
        f"    region={_py(region)},\n"
        f"    voice={_py(DEFAULT_VOICE_ID)},{VOICE_COMMENT}\n"
        f"    sample_rate={SAMPLE_RATE},\n"
        ")\n"
    )


def client_sagemaker(endpoint: SageMakerEndpoint, region: str) -> str:
    return (
        "import asyncio\n"
        "\n"
        "from sonic_deploy.client import SageMakerClient\n"
        "\n"
        "\n"
        "async def main() -> None:\n"
        f"    async with SageMakerClient({_py(endpoint.endpoint_name)}, region={_py(region)}) as sonic:\n"
        f'        async for chunk in sonic.speak("Hello from Sonic.", voice={_py(DEFAULT_VOICE_ID)}):\n'
        "            ...  # play or forward each piece of audio as it comes\n"
        "\n"
        "\n"
        "asyncio.run(main())\n"
    )
