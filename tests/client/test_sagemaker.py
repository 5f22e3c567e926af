"""The SageMaker client against `probe serve`: whole utterances, however the parts are cut; typed errors;
closing the stream; credentials refreshed as botocore says."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import threading
from pathlib import Path
from typing import Any

import botocore.session
import orjson
import pytest

from sonic_deploy.client import (
    AccessError,
    EndpointUnreachableError,
    InvalidRequestError,
    RequestTimeoutError,
    SageMakerClient,
    StreamError,
    ThrottledError,
)
from sonic_deploy.client.eventstream import payload_part
from sonic_deploy.client.sagemaker import request_body
from tests.client.refreshing import Clock, refreshing_session
from tests.probe.private_ca import make_private_ca
from tests.standins.harness import ReferenceServer, ServerFactory
from tests.standins.real_clients import FAST, PACED, counted, stream_bytes, wait_for_stats

VOICE = "a0e99841-438c-4a64-b679-ae501e7d6091"
# Seconds of audio in real time (PACED): long enough to act on mid-way whatever the machine's load.
LONG = "A long answer that the caller interrupts, " * 3
SENTENCES = ["Hello there.", "Your table is booked for eight.", "Is there anything else?"]


def _client(server: ReferenceServer, **options: Any) -> SageMakerClient:
    return SageMakerClient("sonic-test", region="us-east-2", endpoint_url=server.base, **options)


async def _speak_once(client: SageMakerClient, text: str) -> bytes:
    """One utterance on a client made for it, closed after it (an unclosed pool is aiohttp's "Unclosed
    client session" once collected)."""
    async with client:
        return await _speak(client, text)


async def _speak(client: SageMakerClient, text: str, rate: int = 24000, voice: str = VOICE) -> bytes:
    audio = bytearray()
    async for chunk in client.speak(text, voice=voice, sample_rate=rate):
        audio += chunk.data
    return bytes(audio)


@pytest.mark.parametrize("parts", ["aligned", "split", "packed", "mixed"])
def test_sentences_in_a_row_arrive_whole_however_the_parts_cut_the_events(
    parts: str, reference_server: ServerFactory
) -> None:
    server = reference_server(*FAST, "--parts", parts)

    async def run() -> list[bytes]:
        async with _client(server, max_connections=1) as client:
            return [await _speak(client, text) for text in SENTENCES]

    spoken = asyncio.run(run())
    assert [len(audio) for audio in spoken] == [stream_bytes(text) for text in SENTENCES]


def test_chunks_are_the_requested_rate_and_stamped_in_order(reference_server: ServerFactory) -> None:
    server = reference_server(*FAST)

    async def run() -> list[Any]:
        async with _client(server) as client:
            return [chunk async for chunk in client.speak("Eight kilohertz.", voice=VOICE, sample_rate=8000)]

    chunks = asyncio.run(run())
    assert sum(len(chunk.data) for chunk in chunks) == stream_bytes("Eight kilohertz.", rate=8000)
    assert [chunk.at for chunk in chunks] == sorted(chunk.at for chunk in chunks)


def test_no_free_capacity_is_a_throttled_error_with_the_models_status(
    reference_server: ServerFactory,
) -> None:
    server = reference_server(*FAST, "--capacity", "0")
    with pytest.raises(ThrottledError) as raised:
        asyncio.run(_speak_once(_client(server), "Busy?"))
    assert (raised.value.kind, raised.value.status, raised.value.retryable) == ("model_error_429", 429, True)


def test_a_request_the_model_refuses_is_an_invalid_request(reference_server: ServerFactory) -> None:
    server = reference_server(*FAST)

    async def run() -> None:
        async with _client(server) as client:
            async for _ in client.events({"context_id": "c", "transcript": "no voice"}):
                pass

    with pytest.raises(InvalidRequestError) as raised:
        asyncio.run(run())
    assert (raised.value.kind, raised.value.retryable) == ("model_error_422", False)


@pytest.mark.parametrize(
    ("fault", "kind"),
    [("stream_error", "model_stream_error"), ("reset", "cut"), ("malformed", "malformed")],
)
def test_a_stream_that_breaks_is_a_stream_error(
    fault: str, kind: str, reference_server: ServerFactory
) -> None:
    server = reference_server(*FAST, "--fault", f"{fault}:1")
    with pytest.raises(StreamError) as raised:
        asyncio.run(_speak_once(_client(server), "This one breaks."))
    assert raised.value.kind == kind


def test_a_local_mistake_is_named_before_anything_is_sent(reference_server: ServerFactory) -> None:
    server = reference_server(*FAST)
    client = _client(server)
    with pytest.raises(ValueError, match=r"output_format\.sample_rate"):
        asyncio.run(_speak(client, "Hi.", rate=11025))
    with pytest.raises(ValueError, match="voice"):
        asyncio.run(_speak(client, "Hi.", voice=""))
    with pytest.raises(ValueError, match="transcript is empty"):
        asyncio.run(_speak(client, "  "))
    assert counted(server.stats(), "access_key") == {}


def test_closing_the_stream_mid_utterance_ends_it_on_the_server(reference_server: ServerFactory) -> None:
    server = reference_server(*PACED)  # audio in real time, 60 ms a character

    async def run() -> bytes:
        async with _client(server) as client:
            stream = client.speak(LONG, voice=VOICE)
            async with contextlib.aclosing(stream):
                async for _ in stream:
                    break  # the caller spoke: stop listening
            return await _speak(client, "After.")

    after = asyncio.run(run())
    assert len(after) == stream_bytes("After.")
    stats = wait_for_stats(server, lambda s: s.get("interrupted", 0) == 1 and s.get("active") == 0)
    assert (stats.get("interrupted"), stats.get("completed"), stats["active"]) == (1, 1, 0)


def test_cancelling_the_task_ends_the_stream(reference_server: ServerFactory) -> None:
    server = reference_server(*PACED)  # audio in real time, 60 ms a character

    async def run() -> None:
        async with _client(server) as client:
            first = asyncio.Event()

            async def listen() -> None:
                async for _ in client.speak(LONG, voice=VOICE):
                    first.set()

            task = asyncio.create_task(listen())
            await first.wait()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    asyncio.run(run())
    stats = wait_for_stats(server, lambda s: s.get("interrupted", 0) == 1 and s.get("active") == 0)
    assert (stats.get("interrupted"), stats["active"]) == (1, 0)


def test_an_utterances_wait_bound_ends_a_stall_and_a_wait_for_a_connection(
    reference_server: ServerFactory,
) -> None:
    """`wait_timeout_s` (the LiveKit service's `conn_options.timeout`): a stream that stalls mid-way ends
    at it, and so does a wait for the one pooled connection the stalled stream holds; each error names the
    bound. The client's own read bound is longer than the stall: only the utterance's can end it in time."""
    server = reference_server(*FAST, "--fault", "stall:1", "--stall-ms", "60000")

    async def run() -> tuple[str, str]:
        async with _client(server, max_connections=1, read_timeout_s=120) as client, asyncio.timeout(10):
            stalled = client.speak("This one stalls half-way.", voice=VOICE, wait_timeout_s=0.3)
            async with contextlib.aclosing(stalled):
                await anext(stalled)  # the pool's one connection is this stream's
                queued = client.speak("Waits for the connection.", voice=VOICE, wait_timeout_s=0.3)
                with pytest.raises(RequestTimeoutError) as no_connection:
                    await anext(queued)
                with pytest.raises(RequestTimeoutError) as no_bytes:
                    async for _ in stalled:
                        pass
        return str(no_connection.value), str(no_bytes.value)

    no_connection, no_bytes = asyncio.run(run())
    assert "no connection to the runtime endpoint within 0.3 s" in no_connection
    assert "no bytes within 0.3 s" in no_bytes


def test_a_wait_bound_is_a_positive_number_of_seconds() -> None:
    """Refused before anything is sent: the endpoint is never reached."""
    for bound in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match=r"wait_timeout_s=.*: not a positive number of seconds"):
            asyncio.run(_speak_bounded(bound))


async def _speak_bounded(bound: float) -> None:
    async with SageMakerClient("sonic-test", region="us-east-2", endpoint_url="http://127.0.0.1:9") as client:
        async for _ in client.speak("Hi.", voice=VOICE, wait_timeout_s=bound):
            pass


def test_credentials_are_refreshed_once_off_the_loop_before_they_expire(
    reference_server: ServerFactory,
) -> None:
    server = reference_server(*FAST)
    clock, fetched_in = Clock(), list[threading.Thread]()
    session = refreshing_session(clock, ["AKIDFIRST", "AKIDSECOND", "AKIDTHIRD"], fetched_in)

    async def run() -> None:
        async with _client(server, session=session) as client:
            await _speak(client, "Signed with the first key.")
            clock.now += datetime.timedelta(minutes=55)  # inside botocore's mandatory refresh window
            # Three sentences at once at the refresh: one refresh, in a thread, for all three.
            await asyncio.gather(*(_speak(client, f"Signed with the second key, {n}.") for n in range(3)))

    asyncio.run(run())
    assert counted(server.stats(), "access_key") == {"AKIDFIRST": 1, "AKIDSECOND": 3}
    assert len(fetched_in) == 2 and threading.main_thread() not in fetched_in[1:]


def test_one_connection_serves_the_sentences_in_turn(reference_server: ServerFactory) -> None:
    server = reference_server(*FAST)

    async def run() -> list[dict[str, float]]:
        traces: list[dict[str, float]] = []
        async with _client(server, max_connections=1) as client:
            for text in SENTENCES:
                traces.append({})
                body = request_body(text, voice=VOICE)
                async for _ in client.events(body, trace=traces[-1]):
                    pass
        return traces

    assert ["connect_s" in trace for trace in asyncio.run(run())] == [True, False, False]


def test_a_client_serves_one_event_loop_after_another(reference_server: ServerFactory) -> None:
    client = _client(reference_server(*FAST))
    assert asyncio.run(_speak(client, "First loop.")) and asyncio.run(_speak(client, "Second loop."))


@pytest.mark.parametrize("after_done", ["reset", "silence"])
def test_a_stream_is_whole_at_its_done_whatever_follows(after_done: str) -> None:
    """A server that, after `done`, drops the connection or says nothing more: the utterance is whole,
    and no error follows it (the connection is simply not reused)."""
    frames = b"".join(
        payload_part(orjson.dumps(event) + b"\n")
        for event in ({"type": "chunk", "data": "AAAA", "done": False}, {"type": "done", "done": True})
    )

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.amazon.eventstream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + f"{len(frames):x}\r\n".encode() + frames + b"\r\n"
        )
        await writer.drain()
        if after_done == "reset":
            writer.transport.abort()
        else:
            await asyncio.sleep(30)

    async def run() -> bytes:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = SageMakerClient(
            "e", region="us-east-2", endpoint_url=f"http://127.0.0.1:{port}", read_timeout_s=1.0
        )
        try:
            return await asyncio.wait_for(_speak(client, "Hi."), 20)
        finally:
            await client.close()
            server.close()

    assert asyncio.run(run()) == b"\x00\x00\x00"


def test_an_untrusted_certificate_is_named_and_not_retried(
    reference_server: ServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca = make_private_ca(tmp_path)
    server = reference_server(*FAST, "--tls-cert", str(ca.cert), "--tls-key", str(ca.key), ca_file=ca.ca)
    with pytest.raises(EndpointUnreachableError) as raised:
        asyncio.run(_speak_once(_client(server, session=botocore.session.Session()), "Untrusted."))
    assert (raised.value.kind, raised.value.retryable) == ("tls", False)
    assert "AWS_CA_BUNDLE" in raised.value.message
    monkeypatch.setenv("AWS_CA_BUNDLE", str(ca.ca))  # boto3's own setting, read by the client too
    client = _client(server, session=botocore.session.Session())
    assert len(asyncio.run(_speak_once(client, "Trusted."))) == stream_bytes("Trusted.")


def test_no_credentials_is_an_access_error_with_the_fix(
    reference_server: ServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    client = _client(reference_server(*FAST), session=botocore.session.Session())
    with pytest.raises(AccessError, match=r"no AWS credentials found\. Fix:"):
        asyncio.run(_speak(client, "Hi."))


def test_nothing_listening_is_an_unreachable_endpoint() -> None:
    import socket

    with socket.socket() as placeholder:
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]
    client = SageMakerClient("sonic-test", region="us-east-2", endpoint_url=f"http://127.0.0.1:{port}")
    with pytest.raises(EndpointUnreachableError) as raised:
        asyncio.run(_speak_once(client, "Anyone?"))
    assert raised.value.kind == "refused"


def test_no_region_is_named_with_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(ValueError, match=r"no AWS Region .* Fix: pass region="):
        SageMakerClient("sonic-test", session=botocore.session.Session())
