"""SageMaker `InvokeEndpointWithResponseStream` on the event loop (`--client async`, the default).

The same request a boto3 client sends: the endpoint and signing name come from a boto3 client of
`sagemaker-runtime`, the credentials from boto3's chain, the signature from botocore's SigV4. The I/O
differs: aiohttp on the event loop, with no thread per request; and the event-stream frames are decoded by
`eventstream.FrameDecoder` (checked against botocore's decoder in the tests), which parses each distinct
header block once where botocore parses every message's headers in Python. With 256 streams in flight on a 2-core host, boto3's threads
contend for the interpreter lock and delay the probe's own timestamps by tens of milliseconds; this
client does not (bench/probe_ttfa.py measures both).
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
from typing import Any

import aiohttp
import boto3
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config

from sonic_deploy.probe.eventstream import FrameDecoder, FrameError
from sonic_deploy.probe.metrics import MalformedEventError, StreamRecorder
from sonic_deploy.probe.targets.http import counted_failures, traced_session, traced_start
from sonic_deploy.probe.targets.sagemaker import PartReader, error_kind


def _error_code(headers: Any, body: dict[str, Any]) -> str:
    """As botocore reads a rest-json error: `x-amzn-ErrorType` (before any `:`), else the body's type."""
    code = str(headers.get("x-amzn-ErrorType") or body.get("__type") or body.get("code") or "unknown")
    return code.split(":")[0].rsplit("#", 1)[-1]


class AsyncSageMakerTarget:
    route = "sagemaker"

    def __init__(self, endpoint: str, region: str | None, endpoint_url: str | None, timeout_s: float) -> None:
        self.endpoint, self.timeout_s = endpoint, timeout_s
        boto = boto3.session.Session()
        client = boto.client(
            "sagemaker-runtime",
            region_name=region,
            endpoint_url=endpoint_url,
            config=Config(retries={"total_max_attempts": 1}),
        )
        path = f"/endpoints/{urllib.parse.quote(endpoint, safe='')}/invocations-response-stream"
        self.url = client.meta.endpoint_url.rstrip("/") + path
        self._signer_name = client.meta.service_model.signing_name
        self._region = client.meta.region_name
        credentials = boto.get_credentials()
        if credentials is None:  # `setup_problem` says so, with the fix, before any target is built
            raise RuntimeError("no AWS credentials")
        self._credentials = credentials
        self._session: aiohttp.ClientSession | None = None

    async def start(self, max_in_flight: int) -> None:
        self._session = traced_session(max_in_flight)

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _signed_headers(self, payload: bytes) -> dict[str, str]:
        request = AWSRequest(
            method="POST",
            url=self.url,
            data=payload,
            headers={"Content-Type": "application/json", "Accept": "text/event-stream"},
        )
        SigV4Auth(self._credentials.get_frozen_credentials(), self._signer_name, self._region).add_auth(
            request
        )
        return dict(request.headers.items())

    async def request(self, body: dict[str, Any], recorder: StreamRecorder) -> None:
        assert self._session is not None, "start() first"
        payload = json.dumps(body).encode()
        trace: dict[str, float] = {}
        with counted_failures(recorder, self.timeout_s):
            async with asyncio.timeout(self.timeout_s):
                recorder.sent()
                async with self._session.post(
                    self.url, data=payload, headers=self._signed_headers(payload), trace_request_ctx=trace
                ) as response:
                    traced_start(trace, recorder)
                    if response.status != 200:
                        await self._failed(response, recorder)
                        return
                    await self._read(response, recorder)

    async def _failed(self, response: aiohttp.ClientResponse, recorder: StreamRecorder) -> None:
        text = await response.text()
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = {}
        error = parsed if isinstance(parsed, dict) else {}
        code = _error_code(response.headers, error)
        message = str(error.get("message") or error.get("Message") or text[:200])
        recorder.fail(error_kind(code, error.get("OriginalStatusCode")), message)

    async def _read(self, response: aiohttp.ClientResponse, recorder: StreamRecorder) -> None:
        frames = FrameDecoder()
        parts = PartReader(recorder)
        try:
            async for data in response.content.iter_any():
                at = time.perf_counter()
                for headers, payload in frames.feed(data):
                    if headers.get(":message-type") in ("exception", "error"):
                        code = headers.get(":exception-type") or headers.get(":error-code") or "unknown"
                        recorder.fail(error_kind(str(code)), payload.decode(errors="replace")[:300])
                        return
                    if headers.get(":event-type") == "PayloadPart" and not parts.finished:
                        parts.feed(payload, at)
        except FrameError as error:
            recorder.fail("malformed", f"bad event-stream frame: {error!r}")
            return
        except MalformedEventError as error:
            recorder.fail("malformed", str(error))
            return
        parts.ended()
