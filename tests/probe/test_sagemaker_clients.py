"""The two SageMaker clients against boto3 itself, offline: the same signed request, the same error names,
and "sent" taken when the request leaves, not before boto3 has built it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.compat import HTTPHeaders
from botocore.exceptions import ClientError

from sonic_deploy.audio import AudioFormat
from sonic_deploy.client.eventstream import payload_part
from sonic_deploy.client.sagemaker import SageMakerClient
from sonic_deploy.probe.metrics import StreamRecorder
from sonic_deploy.probe.targets.sagemaker import SageMakerTarget, classify_client_error

ENDPOINT, REGION = "sonic-dev", "us-east-2"
OPERATION_EVENT = "sagemaker-runtime.InvokeEndpointWithResponseStream"
# Set per request by boto3, or its own, or (Content-Length, unsigned) by aiohttp from the body: not part of
# what the two clients must agree on.
VARYING = {
    "user-agent",
    "amz-sdk-invocation-id",
    "amz-sdk-request",
    "x-amz-date",
    "authorization",
    "content-length",
}


class _Raw:
    """Just enough of urllib3's response for botocore: a body streamed in one piece."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, *args: Any, **kwargs: Any) -> Iterator[bytes]:
        yield self._body

    def read(self, *args: Any, **kwargs: Any) -> bytes:
        return self._body

    def close(self) -> None:
        pass


@pytest.fixture
def boto3_client() -> Any:
    return boto3.session.Session().client("sagemaker-runtime", region_name=REGION)


def _boto3_request(client: Any) -> AWSPreparedRequest:
    """The request boto3 would send, caught just before it goes (and answered with a 200, unread)."""
    caught: list[AWSPreparedRequest] = []

    def catch(request: AWSPreparedRequest, **kwargs: Any) -> AWSResponse:
        caught.append(request)
        return AWSResponse(request.url, 200, HTTPHeaders(), _Raw(b""))

    client.meta.events.register(f"before-send.{OPERATION_EVENT}", catch)
    client.invoke_endpoint_with_response_stream(
        EndpointName=ENDPOINT,
        Body=b'{"transcript": "hi"}',
        ContentType="application/json",
        Accept="text/event-stream",
    )
    return caught[0]


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _signed_header_names(authorization: str | bytes) -> str:
    return _text(authorization).split("SignedHeaders=")[1].split(",")[0]


def test_the_async_client_sends_and_signs_what_boto3_sends(boto3_client: Any) -> None:
    expected = _boto3_request(boto3_client)
    client = SageMakerClient(ENDPOINT, region=REGION)
    credentials = asyncio.run(client.credentials())
    ours = client._signer.sign(b'{"transcript": "hi"}', credentials)
    assert client.url == expected.url
    # Accept travels as X-Amzn-SageMaker-Accept, as boto3's serialiser writes it (not as Accept).
    theirs = {k.lower(): _text(v) for k, v in expected.headers.items() if k.lower() not in VARYING}
    assert {k.lower(): v for k, v in ours.items() if k.lower() not in VARYING} == theirs
    assert theirs["x-amzn-sagemaker-accept"] == "text/event-stream"
    signed = _signed_header_names(ours["Authorization"])
    assert signed == _signed_header_names(expected.headers["Authorization"])
    assert "content-length" not in signed.split(";")


ERRORS = [
    (503, {"Content-Type": "text/html"}, b"<html>Service Unavailable</html>"),
    (404, {}, b""),
    (413, {"Content-Type": "application/json"}, b'{"message": "too large"}'),
    (400, {"Content-Type": "application/json"}, b'{"Code": "ValidationError", "Message": "bad"}'),
    (
        424,
        {"x-amzn-ErrorType": "ModelError:http://internal/", "Content-Type": "application/json"},
        json.dumps({"OriginalStatusCode": 429, "OriginalMessage": "busy", "message": "busy"}).encode(),
    ),
    (429, {"x-amzn-ErrorType": "ThrottlingException"}, b'{"message": "slow down"}'),
]


@pytest.mark.parametrize(("status", "headers", "body"), ERRORS, ids=[str(e[0]) for e in ERRORS])
def test_both_clients_name_an_error_response_alike(
    status: int, headers: dict[str, str], body: bytes, boto3_client: Any
) -> None:
    def answer(request: AWSPreparedRequest, **kwargs: Any) -> AWSResponse:
        return AWSResponse(request.url, status, HTTPHeaders.from_dict(headers), _Raw(body))

    boto3_client.meta.events.register(f"before-send.{OPERATION_EVENT}", answer)
    with pytest.raises(ClientError) as raised:
        boto3_client.invoke_endpoint_with_response_stream(EndpointName=ENDPOINT, Body=b"{}")
    boto3_kind, _ = classify_client_error(raised.value)
    error = SageMakerClient(ENDPOINT, region=REGION).error_response(status, headers.items(), body)
    async_kind = error.kind
    assert async_kind == boto3_kind
    assert async_kind != "client_error_unknown"


def test_boto3_client_counts_from_when_botocore_hands_the_request_over() -> None:
    target = SageMakerTarget(ENDPOINT, REGION, None, 5.0)
    asyncio.run(target.start(1))
    moments: dict[str, float] = {}

    def building(**kwargs: Any) -> None:  # before boto3 serialises and signs
        moments["building"] = time.perf_counter()
        time.sleep(0.02)  # a slow client host: this must not count in TTFA

    def network(request: AWSPreparedRequest, **kwargs: Any) -> AWSResponse:  # the wire, after the probe
        moments["sending"] = time.perf_counter()
        audio = (
            b'{"type": "chunk", "data": "AAAAAA==", "done": false}\n'  # a stream without audio is no_audio
        )
        stream = payload_part(audio + b'{"type": "done", "done": true}\n')
        headers = HTTPHeaders.from_dict({"Content-Type": "application/vnd.amazon.eventstream"})
        return AWSResponse(request.url, 200, headers, _Raw(stream))

    events = target._client.meta.events
    events.register(f"before-parameter-build.{OPERATION_EVENT}", building)
    events.register(f"before-send.{OPERATION_EVENT}", network)
    recorder = StreamRecorder(audio=AudioFormat(), scheduled_at=0.0, open_loop=False)
    try:
        target._invoke({"transcript": "hi"}, recorder)
    finally:
        asyncio.run(target.stop())
    assert recorder.ok, recorder.error
    assert recorder.sent_at is not None
    assert moments["building"] + 0.02 <= recorder.sent_at <= moments["sending"]


def test_an_error_body_botocore_cannot_read_is_named_by_its_status() -> None:
    # boto3 itself raises UnicodeDecodeError here (counted as `unexpected` with --client boto3).
    client = SageMakerClient(ENDPOINT, region=REGION)
    error = client.error_response(502, [("Content-Type", "application/json")], b"\xff\xfe not utf-8")
    assert error.kind == "client_error_502"
    assert "not utf-8" in error.message


@pytest.mark.parametrize(
    ("no_proxy", "expected"), [("", "http://proxy.internal:3128"), ("amazonaws.com", None)]
)
def test_the_async_client_goes_through_the_proxy_boto3_would_use(
    no_proxy: str, expected: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", no_proxy)
    assert SageMakerClient(ENDPOINT, region=REGION)._proxy == expected
