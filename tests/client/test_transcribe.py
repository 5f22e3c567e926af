"""`TranscribeClient` against the Transcribe stand-in of `probe serve`, and its presigned URL against
botocore's own presigner: byte for byte at the same instant."""

from __future__ import annotations

import asyncio
import datetime
from typing import cast

import botocore.auth
import botocore.session
import pytest
from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import ReadOnlyCredentials

from sonic_deploy.client import TranscribeClient
from sonic_deploy.client.cartesia_ws import StampedConnection
from sonic_deploy.client.errors import InvalidRequestError, SonicError, StreamError, ThrottledError
from sonic_deploy.client.sigv4 import SigningKey, presign_url
from sonic_deploy.client.transcribe import TranscribeSession
from sonic_deploy.client.turn_hops import SpeechToText
from sonic_deploy.standins.stt import TRANSCRIPT, transcribe_exception
from tests.standins.harness import ReferenceServer, ServerFactory
from tests.stt_speech import FINAL_MS, TIMEOUT_S, turn

OPTIONS = ("--stt-final-ms", str(FINAL_MS))
AT = datetime.datetime(2026, 11, 30, 23, 59, 58, tzinfo=datetime.UTC)
LONG_TERM = ReadOnlyCredentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None)
TEMPORARY = ReadOnlyCredentials("ASIAEXAMPLE", "secret/with+symbols", "FQoGZXIvYXdzEJr//////////token=")
PARAMS = {"language-code": "en-US", "media-encoding": "pcm", "sample-rate": "16000"}


def _client(server: ReferenceServer) -> TranscribeClient:
    return TranscribeClient("us-east-1", endpoint_url=f"ws://127.0.0.1:{server.port}")


def test_partials_then_the_final_no_sooner_than_speech_end_plus_the_delay(
    reference_server: ServerFactory,
) -> None:
    server = reference_server(*OPTIONS)
    client: SpeechToText = _client(server)
    assert client.name == "transcribe"

    async def run() -> None:
        async with await client.session(encoding="pcm_s16le", sample_rate=16000) as session:
            first = await turn(session, "pcm_s16le", 16000)
            second = await turn(session, "pcm_s16le", 16000, speech_ms=400)  # two turns, one stream
        for spoken in (first, second):
            assert spoken.partials, spoken.transcripts
            assert all(TRANSCRIPT.startswith(t.text) for t in spoken.partials)
            assert spoken.final.text == TRANSCRIPT
            delay = spoken.final.at - spoken.speech_end
            assert FINAL_MS / 1000 <= delay < FINAL_MS / 1000 + 1.0

    asyncio.run(run())


def test_8000_hz_works_too(reference_server: ServerFactory) -> None:
    server = reference_server(*OPTIONS)

    async def run() -> str:
        async with await _client(server).session(encoding="pcm_s16le", sample_rate=8000) as session:
            return (await turn(session, "pcm_s16le", 8000)).final.text

    assert asyncio.run(run()) == TRANSCRIPT


def test_mulaw_is_refused_before_connecting_naming_the_fix() -> None:
    client = TranscribeClient("us-east-1", endpoint_url="ws://127.0.0.1:9")
    with pytest.raises(ValueError, match=r"pcm_s16le.*Fix: decode"):
        asyncio.run(client.session(encoding="pcm_mulaw", sample_rate=8000))


def test_no_region_is_a_value_error_naming_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    with pytest.raises(ValueError, match="Fix: pass region="):
        TranscribeClient(session=botocore.session.Session())


def test_the_region_comes_from_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-2")
    assert TranscribeClient(session=botocore.session.Session()).region == "eu-west-2"


def test_a_parameter_the_service_refuses_is_an_invalid_request(reference_server: ServerFactory) -> None:
    server = reference_server(*OPTIONS)

    async def run() -> None:
        async with await _client(server).session(encoding="pcm_s16le", sample_rate=11025) as session:
            async with asyncio.timeout(TIMEOUT_S):
                await session.receive()

    with pytest.raises(InvalidRequestError, match="sample-rate") as raised:
        asyncio.run(run())
    assert raised.value.kind == "client_error_BadRequestException" and raised.value.status == 400


def test_a_server_that_goes_away_is_a_stream_error_not_a_hang(reference_server: ServerFactory) -> None:
    server = reference_server(*OPTIONS)

    async def run() -> None:
        async with await _client(server).session(encoding="pcm_s16le", sample_rate=16000) as session:
            server.process.kill()
            async with asyncio.timeout(TIMEOUT_S):
                await session.receive()

    with pytest.raises(StreamError) as raised:
        asyncio.run(run())
    assert raised.value.kind == "cut"


@pytest.mark.parametrize(
    ("code", "cls", "status", "retryable"),
    [
        ("LimitExceededException", ThrottledError, 429, True),
        ("BadRequestException", InvalidRequestError, 400, False),
        ("ServiceUnavailableException", SonicError, 503, True),
        ("InternalFailureException", SonicError, 500, True),
        ("ConflictException", SonicError, 409, False),
    ],
)
def test_each_stream_exception_is_its_typed_error(
    code: str, cls: type[SonicError], status: int, retryable: bool
) -> None:
    session = TranscribeSession(cast(StampedConnection, None))
    frame = transcribe_exception(code, "told so")
    (headers, payload), *_ = session._decoder.feed(frame)
    with pytest.raises(cls, match="told so") as raised:
        session._read(headers, payload, 0.0)
    assert type(raised.value) is cls
    assert (raised.value.kind, raised.value.status, raised.value.retryable) == (
        f"client_error_{code}",
        status,
        retryable,
    )


def _botocore_url(
    url: str, credentials: ReadOnlyCredentials, region: str, monkeypatch: pytest.MonkeyPatch
) -> str:
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: AT.replace(tzinfo=None))
    request = AWSRequest(method="GET", url=url, params=dict(PARAMS))
    SigV4QueryAuth(credentials, "transcribe", region, expires=300).add_auth(request)
    return str(request.url)


@pytest.mark.parametrize(
    "url",
    [
        "https://transcribestreaming.us-east-1.amazonaws.com:8443/stream-transcription-websocket",
        "https://transcribestreaming.eu-west-2.amazonaws.com/stream-transcription-websocket",
        "http://127.0.0.1:8080/stream-transcription-websocket",
    ],
)
@pytest.mark.parametrize("credentials", [LONG_TERM, TEMPORARY], ids=["long-term", "temporary"])
def test_the_presigned_url_is_botocores(
    url: str, credentials: ReadOnlyCredentials, monkeypatch: pytest.MonkeyPatch
) -> None:
    region = "eu-west-2" if "eu-west-2" in url else "us-east-1"
    ours = presign_url(url, PARAMS, credentials, service="transcribe", region=region, expires_s=300, now=AT)
    assert ours == _botocore_url(url, credentials, region, monkeypatch)


def test_a_kept_key_signs_as_a_fresh_one(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "https://transcribestreaming.us-east-1.amazonaws.com:8443/stream-transcription-websocket"
    key = SigningKey("transcribe", "us-east-1")
    for at, credentials in [
        (AT, LONG_TERM),
        (AT + datetime.timedelta(seconds=3), TEMPORARY),
        (AT, LONG_TERM),
    ]:
        ours = presign_url(
            url, PARAMS, credentials, service="transcribe", region="us-east-1", now=at, key=key
        )
        monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda at=at: at.replace(tzinfo=None))
        request = AWSRequest(method="GET", url=url, params=dict(PARAMS))
        SigV4QueryAuth(credentials, "transcribe", "us-east-1", expires=300).add_auth(request)
        assert ours == request.url
