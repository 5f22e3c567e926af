"""aiohttp's side of `http` and `sagemaker`: "sent" is when the request is written, even on a busy loop."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from types import SimpleNamespace

import aiohttp
import pytest

from sonic_deploy.client.http import PooledClient, pooled_session, stamped_body


def _server(arrivals: list[float]) -> tuple[socket.socket, threading.Thread]:
    """A one-request HTTP server in a thread: it notes when the request's body arrived, then answers."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            received = b""
            while not received.endswith(b"BODY"):
                received += connection.recv(65536)
            arrivals.append(time.perf_counter())
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


async def _busy_loop() -> None:
    """Another coroutine that holds the loop 50 ms at a time, as a probe's other streams do under load."""
    while True:
        await asyncio.sleep(0)
        time.sleep(0.05)


async def _headers_set_aside(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: aiohttp.TraceRequestHeadersSentParams
) -> None:
    context.trace_request_ctx["headers_at"] = time.perf_counter()


class _HeadersTraced(aiohttp.TraceConfig):
    """The probe's tracing, and a note of when aiohttp set the request's headers aside."""

    def __init__(self) -> None:
        super().__init__()
        self.on_request_headers_sent.append(_headers_set_aside)


def test_sent_is_when_the_body_is_written_not_when_the_headers_are_set_aside(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(aiohttp, "TraceConfig", _HeadersTraced)
    arrivals: list[float] = []
    listener, thread = _server(arrivals)
    port = listener.getsockname()[1]
    trace: dict[str, float] = {}

    async def run() -> None:
        busy = asyncio.create_task(_busy_loop())
        async with (
            pooled_session(4) as session,
            session.post(f"http://127.0.0.1:{port}/", data=b"BODY", trace_request_ctx=trace) as answer,
        ):
            assert answer.status == 200
        busy.cancel()

    asyncio.run(run())
    thread.join(timeout=5)
    listener.close()
    # aiohttp sets the headers aside and a separate task writes them with the body, a loop turn later:
    # here the busy coroutine's turn (50 ms) comes in between, by the loop's order, whatever the machine's
    # load. Counted from the headers, TTFA would hold that turn; "sent" is after it, before the arrival.
    assert trace["headers_at"] + 0.05 <= trace["sent_at"] <= arrivals[0]


def _chunk_server(
    pieces: int, gap_s: float, *, sent: list[float] | None = None, hold: threading.Event | None = None
) -> tuple[socket.socket, threading.Thread]:
    """Headers at once, then `pieces` chunks `gap_s` apart (noting in `sent` when each went), then the end once
    `hold` is set (at once without one): held, the body is still open when the reader reads the chunks."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            while not connection.recv(65536).endswith(b"BODY"):
                pass
            connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for _ in range(pieces):
                time.sleep(gap_s)
                if sent is not None:
                    sent.append(time.perf_counter())
                connection.sendall(b"5\r\nhello\r\n")
            if hold is not None:
                hold.wait(timeout=10)
            with contextlib.suppress(OSError):  # a reader that timed out has gone
                connection.sendall(b"0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


def test_body_chunks_are_stamped_when_read_from_the_socket_not_when_the_reader_resumes() -> None:
    """The chunk is read while another coroutine holds the loop (the body goes on, as a stream's does: a
    body that has ended before its reader starts has lost its connection, and is stamped when read)."""
    sent_chunk: list[float] = []
    end = threading.Event()
    listener, thread = _chunk_server(1, 0.1, sent=sent_chunk, hold=end)
    seen: list[tuple[float, float]] = []

    async def run() -> None:
        busy = asyncio.create_task(_busy_loop())
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
        async with (
            pooled_session(4) as session,
            session.post(url, data=b"BODY", trace_request_ctx={}) as response,
        ):
            async for at, data in stamped_body(response):
                seen.append((at, time.perf_counter()))
                assert data == b"hello"
                end.set()
        busy.cancel()

    asyncio.run(run())
    thread.join(timeout=5)
    listener.close()
    ((stamped, resumed),) = seen
    # The busy coroutine runs between the read (which stamps) and the reader's resumption: 50 ms apart.
    assert stamped >= sent_chunk[0]
    assert resumed - stamped >= 0.04


def test_a_chunk_that_came_in_before_the_reader_started_keeps_its_stamp() -> None:
    """The reader starts once the chunk has come in, and the body goes on: the chunk's read counts,
    neither the headers' nor the reader's start."""
    sent_chunk: list[float] = []
    end = threading.Event()
    listener, thread = _chunk_server(1, 0.1, sent=sent_chunk, hold=end)
    seen: list[tuple[float, float, float]] = []

    async def run() -> None:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
        async with (
            pooled_session(4) as session,
            session.post(url, data=b"BODY", trace_request_ctx={}) as response,
        ):
            headers_at = time.perf_counter()
            async with asyncio.timeout(10):
                while response.content.total_bytes == 0:  # until the loop has read the chunk
                    await asyncio.sleep(0.01)
            reader_at = time.perf_counter()
            async for at, data in stamped_body(response):
                seen.append((at, headers_at, reader_at))
                assert data == b"hello"
                end.set()

    asyncio.run(run())
    thread.join(timeout=5)
    listener.close()
    ((stamped, headers_at, reader_at),) = seen
    assert max(sent_chunk[0], headers_at) <= stamped < reader_at


@pytest.mark.parametrize(
    ("turns", "closes"),
    [(0, True), (2, True), (2, False)],
    ids=["before-the-drain-starts", "while-it-drains", "the-loop-ends-unclosed"],
)
def test_closing_the_client_as_a_stream_s_body_drains_closes_its_connection(turns: int, closes: bool) -> None:
    """An agent closes its client right after an utterance, whose body the server has not ended yet: the
    connection being drained in the background is closed too, whether its drain had started or not, and
    when the loop ends without a close (an unclosed one is aiohttp's "Unclosed connection", a socket left
    open)."""
    end = threading.Event()
    listener, thread = _chunk_server(1, 0.1, hold=end)

    async def run() -> aiohttp.ClientResponse:
        client = PooledClient(1, aiohttp.ClientTimeout(total=10))
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
        response = await client._post(url, b"BODY", {}, "the test server", None)
        assert await response.content.readany() == b"hello"  # the utterance's last event
        client._recycle(response)
        for _ in range(turns):
            await asyncio.sleep(0)
        if closes:
            await client.close()
        return response

    try:
        response = asyncio.run(run())
    finally:
        end.set()
        thread.join(timeout=5)
        listener.close()
    assert response.closed and response.connection is None


async def _read_all(port: int, sock_read: float) -> bytes:
    timeout = aiohttp.ClientTimeout(total=None, sock_read=sock_read)
    async with (
        pooled_session(4, timeout=timeout) as session,
        session.post(f"http://127.0.0.1:{port}/", data=b"BODY") as response,
    ):
        return b"".join([data async for _, data in stamped_body(response)])


def test_a_stalled_body_still_times_out_within_sock_read() -> None:
    stalled = threading.Event()
    listener, thread = _chunk_server(2, 0.02, hold=stalled)
    began = time.perf_counter()
    with pytest.raises(aiohttp.SocketTimeoutError):
        asyncio.run(_read_all(listener.getsockname()[1], 0.2))
    waited = time.perf_counter() - began
    stalled.set()
    thread.join(timeout=5)
    listener.close()
    assert 0.2 <= waited < 5, waited
