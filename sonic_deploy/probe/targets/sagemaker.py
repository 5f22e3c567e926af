"""SageMaker `InvokeEndpointWithResponseStream` through boto3 (`--client boto3`), one thread per request.

What a boto3 application sees, boto3's own cost included. Timestamps are taken in the worker thread as
each event is parsed, so they do not wait for the event loop; they do wait for the interpreter lock, which
256 threads share (see `sagemaker_async` for the default client, which has no threads).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    CredentialRetrievalError,
    EndpointConnectionError,
    InvalidRegionError,
    NoCredentialsError,
    ReadTimeoutError,
    ResponseStreamingError,
    TokenRetrievalError,
)
from urllib3.exceptions import ProtocolError
from urllib3.exceptions import ReadTimeoutError as StreamReadTimeoutError

from sonic_deploy.client.eventstream import LineAssembler
from sonic_deploy.client.sagemaker import OPERATION, error_kind
from sonic_deploy.probe.metrics import MalformedEventError, StreamRecorder
from sonic_deploy.probe.targets.cartesia_events import apply_event, decode_event

_CREDENTIAL_ERRORS = (NoCredentialsError, CredentialRetrievalError, TokenRetrievalError)


def classify_client_error(error: ClientError) -> tuple[str, str]:
    code = str(error.response.get("Error", {}).get("Code", "unknown"))
    message = str(error.response.get("Error", {}).get("Message", ""))
    return error_kind(code, error.response.get("OriginalStatusCode")), message


class PartReader:
    """The JSON events carried by a stream's `PayloadPart`s, however the parts cut them."""

    def __init__(self, recorder: StreamRecorder) -> None:
        self.recorder = recorder
        self.finished = False
        self._lines = LineAssembler()

    def feed(self, data: bytes, at: float) -> bool:
        """Account for one part that arrived at `at`; True once the stream is finished (done or error)."""
        for line in self._lines.feed(data):
            self.finished = self.finished or apply_event(decode_event(line), at, self.recorder)
        return self.finished

    def ended(self) -> None:
        """The response ended: without a done event, the stream was cut."""
        if not self.finished:
            pending = self._lines.pending[:40]
            self.recorder.fail("cut", f"stream ended without a done event (pending {pending!r})")


def _refused(error: EndpointConnectionError) -> bool:
    """botocore keeps the socket error in `kwargs["error"]` (urllib3's NewConnectionError) or its chain."""
    cause: BaseException | None = error
    seen = 0
    while cause is not None and seen < 10:
        if isinstance(cause, ConnectionRefusedError) or "Connection refused" in str(cause):
            return True
        kwargs = getattr(cause, "kwargs", {})
        nested = kwargs.get("error") if isinstance(kwargs, dict) else None
        cause = nested if isinstance(nested, BaseException) else (cause.__cause__ or cause.__context__)
        seen += 1
    return False


def setup_problem(region: str | None, endpoint_url: str | None = None) -> str | None:
    """What stops boto3 from calling the endpoint at all, said once, before any request is counted."""
    session = boto3.session.Session()
    if not (region or session.region_name):
        return "no AWS Region for the SageMaker runtime. Fix: pass --region (the endpoint's Region) or set AWS_DEFAULT_REGION"
    try:
        session.client("sagemaker-runtime", region_name=region, endpoint_url=endpoint_url)
    except InvalidRegionError as error:
        return f"--region {region!r} is not usable: {str(error).rstrip('.')}. Fix: a Region such as us-east-2"
    except ValueError as error:  # botocore's "Invalid endpoint: ..."
        return f"--endpoint-url {endpoint_url!r} is not usable: {error}. Fix: an http(s)://HOST[:PORT] URL"
    if session.get_credentials() is None:
        return (
            "no AWS credentials found. Fix: sign in (aws sso login --profile NAME; export AWS_PROFILE=NAME); "
            "against `sonic-deploy probe serve` any values do (AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=x)"
        )
    return None


class SageMakerTarget:
    route = "sagemaker"

    def __init__(self, endpoint: str, region: str | None, endpoint_url: str | None, timeout_s: float) -> None:
        self.endpoint, self.region, self.endpoint_url, self.timeout_s = (
            endpoint,
            region,
            endpoint_url,
            timeout_s,
        )
        self._client: Any = None
        self._threads: ThreadPoolExecutor | None = None
        self._sending = threading.local()  # the recorder of the request this thread is sending

    async def start(self, max_in_flight: int) -> None:
        # Retries would hide errors the probe must count; the pool is as large as the load so no request
        # waits for a connection (Cartesia's advice: reuse connections, size max_pool_connections).
        config = Config(
            max_pool_connections=max_in_flight,
            retries={"total_max_attempts": 1},
            connect_timeout=self.timeout_s,
            read_timeout=self.timeout_s,
            tcp_keepalive=True,
        )
        self._client = boto3.session.Session().client(
            "sagemaker-runtime", region_name=self.region, endpoint_url=self.endpoint_url, config=config
        )
        self._threads = ThreadPoolExecutor(max_workers=max_in_flight, thread_name_prefix="probe-sagemaker")
        # "Sent" is when botocore hands the signed request to urllib3, after serialising and signing it
        # (about a millisecond of boto3's own work that is not the endpoint's); each request has its thread.
        self._client.meta.events.register(f"before-send.sagemaker-runtime.{OPERATION}", self._stamp_sent)

    async def stop(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=True, cancel_futures=True)
        self._threads = None

    async def request(self, body: dict[str, Any], recorder: StreamRecorder) -> None:
        assert self._threads is not None, "start() first"
        await asyncio.get_running_loop().run_in_executor(self._threads, self._invoke, body, recorder)

    def _stamp_sent(self, **kwargs: Any) -> None:
        recorder = getattr(self._sending, "recorder", None)
        if recorder is not None:
            recorder.sent()

    def _invoke(self, body: dict[str, Any], recorder: StreamRecorder) -> None:
        deadline = time.perf_counter() + self.timeout_s
        self._sending.recorder = recorder
        try:
            recorder.sent()  # again just before sending, by `_stamp_sent`
            response = self._client.invoke_endpoint_with_response_stream(
                EndpointName=self.endpoint,
                Body=json.dumps(body).encode(),
                ContentType="application/json",
                Accept="text/event-stream",
            )
            self._read(response["Body"], recorder, deadline)
        except ClientError as error:
            recorder.fail(*classify_client_error(error))
        except (ReadTimeoutError, ConnectTimeoutError, StreamReadTimeoutError) as error:
            recorder.fail("timeout", repr(error))
        except EndpointConnectionError as error:
            recorder.fail("refused" if _refused(error) else "connect", repr(error))
        except (ResponseStreamingError, ConnectionClosedError, ProtocolError) as error:
            recorder.fail("cut", repr(error))
        except MalformedEventError as error:
            recorder.fail("malformed", str(error))
        except _CREDENTIAL_ERRORS as error:  # an expired SSO session, a failed role assumption...
            recorder.fail("credentials", repr(error))
        except BotoCoreError as error:
            recorder.fail("connect" if recorder.first_byte_at is None else "cut", repr(error))

    def _read(self, stream: Any, recorder: StreamRecorder, deadline: float) -> None:
        parts = PartReader(recorder)
        try:
            for event in stream:
                at = time.perf_counter()
                part = event.get("PayloadPart")
                if parts.finished or part is None:
                    continue  # read to the end so that the connection goes back to the pool
                if not parts.feed(part.get("Bytes", b""), at) and at > deadline:
                    recorder.fail("timeout", f"no end of stream within {self.timeout_s} s")
                    return
        finally:
            stream.close()
        parts.ended()
