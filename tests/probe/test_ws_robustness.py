"""The WebSocket target against servers that behave as a newer or a loaded Cartesia API may: message types
it does not know, errors without a context id, a close with 1013, the current and the old error shapes."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection, serve

from sonic_deploy.audio import AudioFormat
from sonic_deploy.client.cartesia_ws import CartesiaSocket, SocketClosedError, UnattributableMessageError
from sonic_deploy.client.websocket import closed_kind
from sonic_deploy.probe.metrics import StreamRecorder
from sonic_deploy.probe.requests import AgentTraffic, RequestTemplate
from sonic_deploy.probe.targets.ws import WebSocketTarget

Handler = Callable[[ServerConnection], Awaitable[None]]
AUDIO = base64.b64encode(b"\x10\x00" * 441).decode()  # 10 ms of 44.1 kHz s16


def chunk(context_id: str) -> str:
    message = {"type": "chunk", "data": AUDIO, "done": False, "status_code": 206, "step_time": 1.0}
    return json.dumps({**message, "context_id": context_id})


def done(context_id: str) -> str:
    return json.dumps({"type": "done", "done": True, "status_code": 200, "context_id": context_id})


async def run_streams(handler: Handler, contexts: list[str], multiplex: int) -> list[StreamRecorder]:
    """Each context as one probe request, all at once, against a server running `handler`."""
    async with serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        target = WebSocketTarget(f"ws://127.0.0.1:{port}", {}, multiplex, timeout_s=10.0)
        await target.start(len(contexts))
        recorders = [StreamRecorder(audio=AudioFormat(), scheduled_at=0.0, open_loop=False) for _ in contexts]
        template = RequestTemplate()
        bodies = [template.body("Hello.", context_id, "ws") for context_id in contexts]
        await asyncio.gather(*(target.request(b, r) for b, r in zip(bodies, recorders, strict=True)))
        await target.stop()
    return recorders


async def requests(connection: ServerConnection, count: int) -> list[dict[str, Any]]:
    return [json.loads(await connection.recv()) for _ in range(count)]


def test_a_message_type_it_does_not_know_is_counted_and_skipped() -> None:
    async def newer_api(connection: ServerConnection) -> None:
        (request,) = await requests(connection, 1)
        context_id = request["context_id"]
        await connection.send(chunk(context_id))
        await connection.send(json.dumps({"type": "prosody_hint", "context_id": context_id, "done": False}))
        await connection.send(chunk(context_id))
        await connection.send(done(context_id))
        await connection.wait_closed()

    (recorder,) = asyncio.run(run_streams(newer_api, ["a"], multiplex=1))
    assert (recorder.ok, recorder.error, recorder.chunks, recorder.ignored_events) == (True, None, 2, 1)


def test_an_error_without_a_context_id_is_the_last_waiting_contexts_not_a_timeout() -> None:
    """A multiplexed socket: the server answers the first context, and refuses the third with a 429 that
    names no context while the second, admitted, is still waiting for its first audio. The refusal belongs
    to the context sent last of those waiting; the others finish."""
    refused: list[str] = []

    async def loaded(connection: ServerConnection) -> None:
        first, second, third = await requests(connection, 3)
        refused.append(third["context_id"])
        await connection.send(chunk(first["context_id"]))
        refusal = {"type": "error", "done": False, "status_code": 429, "title": "Too many requests"}
        await connection.send(json.dumps({**refusal, "message": "no free capacity", "error_code": "busy"}))
        await connection.send(chunk(second["context_id"]))
        for request in (first, second):
            await connection.send(done(request["context_id"]))
        await connection.wait_closed()

    contexts = ["a", "b", "c"]
    recorders = asyncio.run(run_streams(loaded, contexts, multiplex=3))
    outcome = {context_id: (r.ok, r.error) for context_id, r in zip(contexts, recorders, strict=True)}
    assert outcome[refused[0]] == (False, "error_event_429")
    assert sorted(outcome.values()) == [(False, "error_event_429"), (True, None), (True, None)]
    refusal = recorders[contexts.index(refused[0])]
    assert refusal.chunks == 0
    # The current error shape, read whole: code, title and message.
    assert refusal.detail == "busy: Too many requests: no free capacity"


def test_the_old_error_shape_is_read_too() -> None:
    async def old_api(connection: ServerConnection) -> None:
        (request,) = await requests(connection, 1)
        error = {"type": "error", "error": "voice not found", "status_code": 422, "done": True}
        await connection.send(json.dumps({**error, "context_id": request["context_id"]}))
        await connection.wait_closed()

    (recorder,) = asyncio.run(run_streams(old_api, ["a"], multiplex=1))
    assert (recorder.error, recorder.detail) == ("error_event_422", "voice not found")


@pytest.mark.parametrize(("code", "kind"), [(1013, "closed_1013"), (1011, "cut"), (1000, "cut")])
@pytest.mark.parametrize("multiplex", [1, 2])
def test_a_socket_closed_with_1013_is_over_capacity_and_any_other_close_mid_stream_is_a_cut(
    code: int, kind: str, multiplex: int
) -> None:
    async def closing(connection: ServerConnection) -> None:
        (request,) = await requests(connection, 1)
        await connection.send(chunk(request["context_id"]))
        await connection.close(code, "try again later" if code == 1013 else "going away")

    (recorder,) = asyncio.run(run_streams(closing, ["a"], multiplex=multiplex))
    assert (recorder.ok, recorder.error) == (False, kind)
    assert str(code) in str(recorder.detail)


def test_a_call_whose_socket_the_server_closed_between_turns_opens_a_new_one() -> None:
    """The server says goodbye after each turn (as a load balancer's idle timeout would, later): the
    next turn of the call must not be sent on the dead socket."""
    connections: list[ServerConnection] = []

    async def one_turn_each(connection: ServerConnection) -> None:
        connections.append(connection)
        while (request := json.loads(await connection.recv()))["continue"]:
            pass
        await connection.send(chunk(request["context_id"]))
        await connection.send(done(request["context_id"]))
        await connection.close(1000, "idle")

    async def two_turns() -> list[StreamRecorder]:
        async with serve(one_turn_each, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            target = WebSocketTarget(f"ws://127.0.0.1:{port}", {}, 1, timeout_s=10.0, agent=AgentTraffic())
            await target.start(1)
            recorders = []
            for context_id in ("turn-1", "turn-2"):
                recorder = StreamRecorder(audio=AudioFormat(), scheduled_at=0.0, open_loop=False)
                await target.request(RequestTemplate().body("Hello. Bye.", context_id, "ws"), recorder)
                recorders.append(recorder)
                await connections[-1].wait_closed()  # the client has answered the close: it knows
            await target.stop()
        return recorders

    recorders = asyncio.run(two_turns())
    assert [(r.ok, r.error) for r in recorders] == [(True, None), (True, None)]
    assert len(connections) == 2


def test_a_context_without_a_callback_yields_its_messages_until_done_or_the_close() -> None:
    """The client core's iterator (what an agent uses): every message of its context, in order, then the
    end; a socket that closes first raises SocketClosedError with the close code."""

    async def two_contexts(connection: ServerConnection) -> None:
        first, second = await requests(connection, 2)
        await connection.send(chunk(first["context_id"]))
        await connection.send(chunk(second["context_id"]))
        await connection.send(done(first["context_id"]))
        await connection.send(chunk(first["context_id"]))  # late, for a context that has ended: dropped
        await connection.close(1013, "try again later")

    async def read() -> tuple[list[str], SocketClosedError | None, int]:
        async with serve(two_contexts, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            socket = await CartesiaSocket.connect(f"ws://127.0.0.1:{port}", {}, timeout_s=10.0)
            finished, cut = socket.context("a"), socket.context("b")
            await finished.send({"transcript": "Hi."})
            await cut.send({"transcript": "Hello."})
            kinds = [message["type"] async for message, _ in finished.messages()]
            closed = None
            try:
                async for _message in cut.messages():
                    pass
            except SocketClosedError as error:
                closed = error
            await socket.close()
        return kinds, closed, socket.unattributed

    kinds, closed, unattributed = asyncio.run(read())
    assert kinds == ["chunk", "done"]
    assert unattributed == 0
    assert closed is not None and closed.code == 1013 and closed.over_capacity


@pytest.mark.parametrize(
    ("unowned", "kind"),
    [
        (json.dumps({"type": "error", "done": False, "status_code": 500}), "unattributed"),
        (chunk("never-opened"), "unattributed"),
        (json.dumps({"type": "chunk", "data": AUDIO, "done": False}), "unattributed"),
        ('{"type": "chunk", "data": "AAAA', "malformed"),
    ],
)
def test_a_message_no_context_can_own_ends_every_context_on_the_socket_at_once(
    unowned: str, kind: str
) -> None:
    """Both contexts have had audio (so an error naming none is no waiting context's): whose the message
    was cannot be known, so both end at once with its kind, and the socket takes no new context; the
    server then says nothing more, so only this ends them before their timeout."""

    async def unattributable(connection: ServerConnection) -> None:
        first, second = await requests(connection, 2)
        await connection.send(chunk(first["context_id"]))
        await connection.send(chunk(second["context_id"]))
        await connection.send(unowned)
        await connection.wait_closed()

    async def read() -> tuple[list[str], bool, str, int]:
        async with serve(unattributable, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            socket = await CartesiaSocket.connect(f"ws://127.0.0.1:{port}", {}, timeout_s=10.0)
            contexts = [socket.context("a"), socket.context("b")]
            for context in contexts:
                await context.send({"transcript": "Hi."})
            kinds = []
            for context in contexts:
                with pytest.raises(UnattributableMessageError) as lost:
                    async with asyncio.timeout(10):
                        async for _message in context.messages():
                            pass
                kinds.append(lost.value.kind)
            # Opened on the lost socket, never sent: the connection-lost kind, not an attribution failure.
            late = socket.context("c")
            assert late.lost is None and late.closed is not None
            usable = socket.open
            await socket.close()
        return kinds, usable, closed_kind(late.closed), socket.unattributed

    assert asyncio.run(read()) == ([kind, kind], False, "cut", 1)


def test_on_a_dedicated_socket_a_message_for_another_context_is_dropped_and_counted() -> None:
    """One context at a time: a message naming another context, or none, is no part of this one's audio
    and no other's (the SDK drops it too); the context ends whole on its own messages, the drop counted on
    it, and the socket stays usable."""

    async def misrouting(connection: ServerConnection) -> None:
        (request,) = await requests(connection, 1)
        await connection.send(chunk("someone-else"))
        await connection.send(json.dumps({"type": "chunk", "data": AUDIO, "done": False}))
        await connection.send(chunk(request["context_id"]))
        await connection.send(done(request["context_id"]))
        await connection.wait_closed()

    async def read() -> tuple[list[str], int, int, int, bool]:
        async with serve(misrouting, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            url = f"ws://127.0.0.1:{port}"
            socket = await CartesiaSocket.connect(url, {}, timeout_s=10.0, multiplexed=False)
            context = socket.context("mine")
            await context.send({"transcript": "Hi."})
            async with asyncio.timeout(10):
                kinds = [message["type"] async for message, _ in context.messages()]
            usable = socket.open
            await socket.close()
        return kinds, context.foreign, socket.foreign, socket.unattributed, usable

    # Dropped and counted as foreign, not as `unattributed` (which ends a multiplexed socket's contexts).
    assert asyncio.run(read()) == (["chunk", "done"], 2, 2, 0, True)
