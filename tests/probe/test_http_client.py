"""aiohttp's side of `http` and `sagemaker`: "sent" is when the request is written, even on a busy loop."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

from sonic_deploy.probe.targets.http import stamped_body, traced_session


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


def test_sent_is_when_the_body_is_written_not_when_the_headers_are_set_aside() -> None:
    arrivals: list[float] = []
    listener, thread = _server(arrivals)
    port = listener.getsockname()[1]
    trace: dict[str, float] = {}

    async def run() -> None:
        busy = asyncio.create_task(_busy_loop())
        async with (
            traced_session(4) as session,
            session.post(f"http://127.0.0.1:{port}/", data=b"BODY", trace_request_ctx=trace) as answer,
        ):
            assert answer.status == 200
        busy.cancel()

    asyncio.run(run())
    thread.join(timeout=5)
    listener.close()
    # aiohttp sets the headers aside and a separate task writes them with the body, a loop turn (here at
    # least 50 ms) later: counted from the headers, TTFA would hold that turn.
    assert 0 <= arrivals[0] - trace["sent_at"] < 0.045  # under one busy turn (50 ms)


def _chunk_server(sent_chunk: list[float]) -> tuple[socket.socket, threading.Thread]:
    """Headers at once, then one chunk 100 ms later (noting when it was sent), then the end 300 ms after
    that: the body is still open when the reader reads the chunk."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            while not connection.recv(65536).endswith(b"BODY"):
                pass
            connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            time.sleep(0.1)
            sent_chunk.append(time.perf_counter())
            connection.sendall(b"5\r\nhello\r\n")
            time.sleep(0.3)
            connection.sendall(b"0\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


def test_body_chunks_are_stamped_when_read_from_the_socket_not_when_the_reader_resumes() -> None:
    """The chunk is read while another coroutine holds the loop (the body goes on, as a stream's does: a
    body that has ended before its reader starts has lost its connection, and is stamped when read)."""
    sent_chunk: list[float] = []
    listener, thread = _chunk_server(sent_chunk)
    seen: list[tuple[float, float]] = []

    async def run() -> None:
        busy = asyncio.create_task(_busy_loop())
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
        async with (
            traced_session(4) as session,
            session.post(url, data=b"BODY", trace_request_ctx={}) as response,
        ):
            async for at, data in stamped_body(response):
                seen.append((at, time.perf_counter()))
                assert data == b"hello"
        busy.cancel()

    asyncio.run(run())
    thread.join(timeout=5)
    listener.close()
    ((stamped, resumed),) = seen
    # The busy coroutine runs between the read (which stamps) and the reader's resumption: 50 ms apart.
    assert stamped >= sent_chunk[0]
    assert resumed - stamped >= 0.04


def test_a_chunk_that_came_in_before_the_reader_started_keeps_its_stamp() -> None:
    """The reader starts 200 ms after the headers, 100 ms after the chunk came in (the body goes on): the
    chunk's read counts, neither the headers' nor the reader's start."""
    sent_chunk: list[float] = []
    listener, thread = _chunk_server(sent_chunk)
    seen: list[tuple[float, float]] = []

    async def run() -> None:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
        async with (
            traced_session(4) as session,
            session.post(url, data=b"BODY", trace_request_ctx={}) as response,
        ):
            headers_at = time.perf_counter()
            await asyncio.sleep(0.2)
            async for at, data in stamped_body(response):
                seen.append((at, headers_at))
                assert data == b"hello"

    asyncio.run(run())
    thread.join(timeout=5)
    listener.close()
    ((stamped, headers_at),) = seen
    assert sent_chunk[0] <= stamped < headers_at + 0.15
