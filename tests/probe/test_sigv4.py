"""The probe's SigV4 signer against botocore's own, at the same instant: the same headers, byte for byte."""

from __future__ import annotations

import datetime

import botocore.auth
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import ReadOnlyCredentials

from sonic_deploy.client.sigv4 import RequestSigner

HEADERS = {"Content-Type": "application/json", "X-Amzn-SageMaker-Accept": "text/event-stream"}
PAYLOAD = b'{"transcript": "Hello, world.", "context_id": "c-1"}'
LONG_TERM = ReadOnlyCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None)
TEMPORARY = ReadOnlyCredentials("ASIAEXAMPLE", "secret/with+symbols", "FQoGZXIvYXdzEJr//////////token=")


def botocore_headers(
    url: str, headers: dict[str, str], credentials: ReadOnlyCredentials, at: datetime.datetime,
    monkeypatch: pytest.MonkeyPatch, service: str = "sagemaker", region: str = "us-east-2",
) -> dict[str, str]:  # fmt: skip
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: at.replace(tzinfo=None))
    request = AWSRequest(method="POST", url=url, data=PAYLOAD, headers=dict(headers))
    SigV4Auth(credentials, service, region).add_auth(request)
    return {name: str(value) for name, value in request.headers.items()}


URLS = [
    "https://runtime.sagemaker.us-east-2.amazonaws.com/endpoints/sonic-dev/invocations-response-stream",
    "https://runtime.sagemaker.us-east-2.amazonaws.com:443/endpoints/sonic-dev/invocations-response-stream",
    "http://127.0.0.1:8080/endpoints/bench/invocations-response-stream",
    "http://[::1]:9000/endpoints/bench/invocations-response-stream",
    "https://VPCE-0abc.Runtime.SageMaker.us-east-2.vpce.amazonaws.com/endpoints/a%20b/invocations-response-stream",
]


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("credentials", [LONG_TERM, TEMPORARY], ids=["long-term", "temporary"])
def test_the_signature_is_botocores(
    url: str, credentials: ReadOnlyCredentials, monkeypatch: pytest.MonkeyPatch
) -> None:
    at = datetime.datetime(2026, 11, 30, 23, 59, 58, tzinfo=datetime.UTC)
    signer = RequestSigner(url, HEADERS, "sagemaker", "us-east-2")
    assert signer.sign(PAYLOAD, credentials, at) == botocore_headers(
        url, HEADERS, credentials, at, monkeypatch
    )


def test_the_kept_signing_key_changes_with_the_day_and_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    signer = RequestSigner(URLS[0], HEADERS, "sagemaker", "us-east-2")
    before_midnight = datetime.datetime(2026, 11, 30, 23, 59, 59, tzinfo=datetime.UTC)
    after_midnight = before_midnight + datetime.timedelta(seconds=2)
    for at, credentials in [
        (before_midnight, LONG_TERM),
        (after_midnight, LONG_TERM),  # a new day: a new key
        (after_midnight, TEMPORARY),  # refreshed credentials: a new key
        (before_midnight, LONG_TERM),
    ]:
        expected = botocore_headers(URLS[0], HEADERS, credentials, at, monkeypatch)
        assert signer.sign(PAYLOAD, credentials, at) == expected


def test_header_values_are_trimmed_as_sigv4_says(monkeypatch: pytest.MonkeyPatch) -> None:
    at = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
    spaced = {"Content-Type": "  application/json ", "X-Custom": "a   b\tc"}
    signer = RequestSigner(URLS[2], spaced, "sagemaker", "eu-west-1")
    expected = botocore_headers(URLS[2], spaced, LONG_TERM, at, monkeypatch, region="eu-west-1")
    assert signer.sign(PAYLOAD, LONG_TERM, at) == expected


def test_the_instant_is_taken_in_utc(monkeypatch: pytest.MonkeyPatch) -> None:
    utc = datetime.datetime(2026, 11, 30, 23, 59, 58, tzinfo=datetime.UTC)
    berlin = utc.astimezone(datetime.timezone(datetime.timedelta(hours=1)))  # already 1 December there
    signer = RequestSigner(URLS[0], HEADERS, "sagemaker", "us-east-2")
    assert signer.sign(PAYLOAD, LONG_TERM, berlin) == botocore_headers(
        URLS[0], HEADERS, LONG_TERM, utc, monkeypatch
    )
    with pytest.raises(ValueError, match="time zone"):
        signer.sign(PAYLOAD, LONG_TERM, utc.replace(tzinfo=None))


def test_a_url_with_a_query_string_is_refused() -> None:
    with pytest.raises(ValueError, match="query string"):
        RequestSigner(URLS[0] + "?x=1", HEADERS, "sagemaker", "us-east-2")


@pytest.mark.parametrize(
    "extra",
    [
        {"Host": "elsewhere"},
        {"X-Amz-Date": "20260101T000000Z"},
        {"User-Agent": "probe"},
        {"content-type": "x"},
    ],
    ids=["host", "x-amz-date", "unsigned-by-botocore", "case-duplicate"],
)
def test_fixed_headers_the_signer_cannot_sign_as_botocore_would_are_refused(extra: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="fixed headers") as raised:
        RequestSigner(URLS[0], {**HEADERS, **extra}, "sagemaker", "us-east-2")
    assert next(iter(extra)).lower() in str(raised.value).lower()  # the message names the header
