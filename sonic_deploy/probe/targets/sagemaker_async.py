"""SageMaker `InvokeEndpointWithResponseStream` on the event loop (`--client async`, the default).

boto3's request, sent without boto3's threads. A botocore client of `sagemaker-runtime` (what boto3 is
built on; one per process) gives the endpoint URL, the signing name, the Region, the credentials (boto3's
chain) and the service model: the headers are the ones its serialiser writes (`Accept` travels as
`X-Amzn-SageMaker-Accept`), the signature is SigV4 (`sigv4.RequestSigner`: the headers botocore's signer
writes, at a fraction of its CPU), and error responses are parsed by botocore's own parser, so both
clients name errors alike. What differs is the I/O: aiohttp on the event loop, with no thread per request,
and the event-stream frames decoded by `eventstream.FrameDecoder` (checked against botocore's decoder in
the tests), which parses each distinct header block once where botocore parses every message's headers in
Python. With 256 streams in flight on a 2-core host, boto3's threads contend for the interpreter lock and
delay the probe's own timestamps by tens of milliseconds; this client does not (bench/probe_ttfa.py
measures both).
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
import urllib.parse
from collections.abc import Iterable
from typing import Any

import aiohttp
import botocore.session
from botocore.awsrequest import HeadersDict
from botocore.config import Config
from botocore.credentials import ReadOnlyCredentials
from botocore.exceptions import BotoCoreError
from botocore.parsers import create_parser
from botocore.utils import get_environ_proxies

from sonic_deploy.probe.eventstream import FrameDecoder, FrameError
from sonic_deploy.probe.metrics import MalformedEventError, StreamRecorder
from sonic_deploy.probe.sigv4 import RequestSigner
from sonic_deploy.probe.targets.http import counted_failures, stamped_body, traced_session, traced_start
from sonic_deploy.probe.targets.sagemaker import OPERATION, PartReader, error_kind

# Enough of an error body for its code and message; the rest is not read.
ERROR_BODY_BYTES = 64 * 1024


@functools.cache
def runtime_client(region: str | None, endpoint_url: str | None) -> tuple[botocore.session.Session, Any]:
    """botocore's session (boto3's credential chain and config) and one client per process and place:
    building a client loads the service model (tens of thousands of objects), which a level must not do,
    nor leave behind as garbage."""
    session = botocore.session.get_session()
    client = session.create_client(
        "sagemaker-runtime",
        region_name=region,
        endpoint_url=endpoint_url,
        config=Config(retries={"total_max_attempts": 1}),
    )
    return session, client


class _Credentials:
    """Frozen credentials, refreshed in a thread when botocore says so: a refresh may call STS, SSO or the
    instance metadata service, and must not stall the event loop (every stream's timestamps with it)."""

    def __init__(self, source: Any) -> None:
        self._source = source
        self._frozen: ReadOnlyCredentials | None = None
        self._lock = asyncio.Lock()

    def _refresh_needed(self) -> bool:
        refresh_needed = getattr(self._source, "refresh_needed", None)
        return callable(refresh_needed) and bool(refresh_needed())

    async def get(self) -> ReadOnlyCredentials:
        frozen = self._frozen
        if frozen is None or self._refresh_needed():
            async with self._lock:
                frozen = self._frozen
                if frozen is None or self._refresh_needed():
                    frozen = await asyncio.to_thread(self._fetch)
                    self._frozen = frozen
        return frozen

    def _fetch(self) -> ReadOnlyCredentials:
        frozen: ReadOnlyCredentials = self._source.get_frozen_credentials()
        return frozen


class AsyncSageMakerTarget:
    route = "sagemaker"

    def __init__(self, endpoint: str, region: str | None, endpoint_url: str | None, timeout_s: float) -> None:
        self.endpoint, self.timeout_s = endpoint, timeout_s
        self._botocore, client = runtime_client(region, endpoint_url)
        path = f"/endpoints/{urllib.parse.quote(endpoint, safe='')}/invocations-response-stream"
        self.url = client.meta.endpoint_url.rstrip("/") + path
        operation = client.meta.service_model.operation_model(OPERATION)
        members = operation.input_shape.members
        # The wire names the serialiser uses: `ContentType` -> Content-Type, `Accept` -> X-Amzn-SageMaker-Accept.
        headers = {
            members["ContentType"].serialization["name"]: "application/json",
            members["Accept"].serialization["name"]: "text/event-stream",
        }
        signing_name = client.meta.service_model.signing_name
        self._signer = RequestSigner(self.url, headers, signing_name, client.meta.region_name)
        self._parser = create_parser(client.meta.service_model.metadata["protocol"])
        self._output_shape = operation.output_shape
        self._service_model = client.meta.service_model
        self._credentials: _Credentials | None = None
        self._proxy: str | None = None
        self._session: aiohttp.ClientSession | None = None

    async def start(self, max_in_flight: int) -> None:
        source = self._botocore.get_credentials()
        if source is None:  # `setup_problem` says so, with the fix, before any target is built
            raise RuntimeError("no AWS credentials")
        self._credentials = _Credentials(source)
        # As boto3 does: its CA bundle (AWS_CA_BUNDLE or the config file), and HTTP(S)_PROXY / NO_PROXY,
        # looked up once here by botocore's own rule (aiohttp's trust_env looks them up on every request:
        # measurable CPU at 256 streams).
        ca_bundle = self._botocore.get_config_variable("ca_bundle")
        context = ssl.create_default_context(cafile=ca_bundle) if ca_bundle else None
        self._proxy = get_environ_proxies(self.url).get(urllib.parse.urlsplit(self.url).scheme)
        self._session = traced_session(max_in_flight, ssl_context=context)

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(self, body: dict[str, Any], recorder: StreamRecorder) -> None:
        assert self._session is not None and self._credentials is not None, "start() first"
        payload = json.dumps(body).encode()
        trace: dict[str, float] = {}
        with counted_failures(recorder, self.timeout_s):
            async with asyncio.timeout(self.timeout_s):
                try:
                    credentials = await self._credentials.get()
                except BotoCoreError as error:  # an expired SSO session, a failed role assumption...
                    recorder.fail("credentials", repr(error))
                    return
                headers = self._signer.sign(payload, credentials)
                recorder.sent()  # taken again when aiohttp writes the body (traced_start)
                async with self._session.post(
                    self.url, data=payload, headers=headers, proxy=self._proxy, trace_request_ctx=trace
                ) as response:
                    traced_start(trace, recorder)
                    if response.status != 200:
                        await self._failed(response, recorder)
                        return
                    await self._read(response, recorder)

    async def _failed(self, response: aiohttp.ClientResponse, recorder: StreamRecorder) -> None:
        raw = await response.content.read(ERROR_BODY_BYTES)
        recorder.fail(*self.classify(response.status, response.headers.items(), raw))

    def classify(self, status: int, headers: Iterable[tuple[str, str]], raw: bytes) -> tuple[str, str]:
        """An error response, parsed by botocore's own parser with its modelled fields (`OriginalStatusCode`),
        as boto3 parses it: (error kind, message)."""
        answer = {"status_code": status, "headers": HeadersDict(headers), "body": raw}
        try:
            parsed: dict[str, Any] = self._parser.parse(answer, self._output_shape)
            code = str(parsed.get("Error", {}).get("Code") or status)
            shape = self._service_model.shape_for_error_code(code)
            if shape is not None:
                parsed.update(self._parser.parse(answer, shape))
        except ValueError:  # a body that is not UTF-8 (a proxy's page, say): named by its status
            parsed, code = {}, str(status)
        message = str(parsed.get("Error", {}).get("Message") or raw[:200].decode(errors="replace"))
        return error_kind(code, parsed.get("OriginalStatusCode")), message

    async def _read(self, response: aiohttp.ClientResponse, recorder: StreamRecorder) -> None:
        frames = FrameDecoder()
        parts = PartReader(recorder)
        try:
            async for at, data in stamped_body(response):
                for headers, payload in frames.feed(data):
                    kind = headers.get(":message-type")
                    if kind == "exception":
                        code = str(headers.get(":exception-type") or "unknown")
                        recorder.fail(error_kind(code), payload.decode(errors="replace")[:300])
                        return
                    if kind == "error":
                        code = str(headers.get(":error-code") or "unknown")
                        recorder.fail(error_kind(code), str(headers.get(":error-message") or ""))
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
