"""SageMaker `InvokeEndpointWithResponseStream` on the event loop (`--client async`, the default).

The requests are the client library's (`sonic_deploy.client.sagemaker.SageMakerClient`, what an agent
runs): boto3's request, signature and error parsing, sent through aiohttp without a thread per request.
This target only accounts for what the client sees: when the request was written, when each event's
bytes came off the socket, and each typed error under its `kind`. With 256 streams in flight on a 2-core
host, boto3's threads contend for the interpreter lock and delay the probe's own timestamps by tens of
milliseconds; this client does not (bench/probe_ttfa.py measures both).
"""

from __future__ import annotations

import asyncio
from typing import Any

from sonic_deploy.client.sagemaker import SageMakerClient, SageMakerError
from sonic_deploy.probe.metrics import MalformedEventError, StreamRecorder
from sonic_deploy.probe.targets.cartesia_events import apply_event
from sonic_deploy.probe.targets.http import traced_start


class AsyncSageMakerTarget:
    route = "sagemaker"

    def __init__(self, endpoint: str, region: str | None, endpoint_url: str | None, timeout_s: float) -> None:
        self.endpoint, self.region, self.endpoint_url, self.timeout_s = (
            endpoint,
            region,
            endpoint_url,
            timeout_s,
        )
        self._client: SageMakerClient | None = None

    async def start(self, max_in_flight: int) -> None:
        # A pool as large as the load, so that no request waits for a connection (Cartesia's advice:
        # reuse connections); no retries, which would hide the errors the probe must count.
        self._client = SageMakerClient(
            self.endpoint,
            region=self.region,
            endpoint_url=self.endpoint_url,
            max_connections=max_in_flight,
            connect_timeout_s=self.timeout_s,
            read_timeout_s=self.timeout_s,
        )

    async def stop(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None

    async def request(self, body: dict[str, Any], recorder: StreamRecorder) -> None:
        assert self._client is not None, "start() first"
        trace: dict[str, float] = {}
        events = self._client.events(body, trace=trace)
        started = False
        try:
            async with asyncio.timeout(self.timeout_s):
                recorder.sent()  # taken again when aiohttp writes the body (traced_start)
                async for at, event in events:
                    if not started:
                        traced_start(trace, recorder)
                        started = True
                    apply_event(event, at, recorder)
        except TimeoutError:
            recorder.fail("timeout", f"no end of stream within {self.timeout_s} s")
        except SageMakerError as error:
            recorder.fail(error.kind, error.message)
        except MalformedEventError as error:
            recorder.fail("malformed", str(error))
        finally:
            await events.aclose()
            if not started:
                traced_start(trace, recorder)
