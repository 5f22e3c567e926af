"""Event-stream frames: ours and botocore's decoders read the same messages from the same bytes; JSON lines
reassembled across parts, and decoded or refused."""

from __future__ import annotations

import json
import struct
import uuid
import zlib

import pytest
from botocore.eventstream import EventStreamBuffer

from sonic_deploy.client.eventstream import (
    FrameDecoder,
    FrameError,
    LineAssembler,
    encode_frame,
    payload_part,
    stream_exception,
)
from sonic_deploy.probe.metrics import MalformedEventError
from sonic_deploy.probe.targets.cartesia_events import decode_event

STREAM = (
    payload_part(b'{"type": "chunk", "data": "AAAA"}\n')
    + payload_part(b'{"type": "done"}\n')
    + stream_exception("ModelStreamError", "boom")
)


def _botocore(data: bytes) -> list[tuple[dict[str, object], bytes]]:
    buffer = EventStreamBuffer()
    buffer.add_data(data)
    messages = [m.to_response_dict() for m in buffer]
    return [(dict(m["headers"]), bytes(m["body"])) for m in messages]


def _typed_headers() -> bytes:
    """One header of every value type the format has (AWS services send strings, but may send others)."""
    tag = uuid.UUID("12345678-1234-5678-1234-567812345678")

    def header(name: str, kind: int, value: bytes) -> bytes:
        return struct.pack("B", len(name)) + name.encode() + struct.pack("B", kind) + value

    return b"".join(
        [
            header("yes", 0, b""),
            header("no", 1, b""),
            header("byte", 2, struct.pack(">b", -3)),
            header("short", 3, struct.pack(">h", -300)),
            header("int", 4, struct.pack(">i", 70000)),
            header("long", 5, struct.pack(">q", -(2**40))),
            header("bytes", 6, struct.pack(">H", 3) + b"\x00\x01\x02"),
            header("string", 7, struct.pack(">H", 2) + b"hi"),
            header("time", 8, struct.pack(">q", 1_700_000_000_000)),
            header("uuid", 9, tag.bytes),
        ]
    )


def test_our_decoder_reads_what_botocore_reads_however_the_bytes_arrive() -> None:
    expected = _botocore(STREAM)
    assert [payload for _, payload in expected][2] == b'{"Message": "boom", "ErrorCode": "ModelStreamError"}'
    for cut in range(len(STREAM) + 1):  # every split of the stream into two reads
        decoder = FrameDecoder()
        assert decoder.feed(STREAM[:cut]) + decoder.feed(STREAM[cut:]) == expected
    decoder = FrameDecoder()
    assert [m for byte in STREAM for m in decoder.feed(bytes([byte]))] == expected


def test_every_header_value_type_decodes_as_botocore_decodes_it() -> None:
    frame = encode_frame(_typed_headers(), b"payload")
    ours, theirs = FrameDecoder().feed(frame), _botocore(frame)
    assert ours[0][1] == theirs[0][1] == b"payload"
    their_headers = theirs[0][0]
    for name, value in ours[0][0].items():
        expected = their_headers[name]
        if name == "uuid":  # botocore gives a UUID as its 16 bytes, ours is its text
            assert isinstance(expected, bytes)
            expected = str(uuid.UUID(bytes=expected))
        assert value == expected, name
    assert set(ours[0][0]) == set(their_headers)


@pytest.mark.parametrize(
    ("offset", "reason"),
    [(2, "prelude checksum mismatch"), (20, "message checksum mismatch")],
)
def test_a_corrupted_frame_is_an_error_not_a_guess(offset: int, reason: str) -> None:
    frame = bytearray(payload_part(b'{"type": "done"}\n'))
    frame[offset] ^= 0x01
    with pytest.raises(FrameError, match=reason):
        FrameDecoder().feed(bytes(frame))


def test_impossible_lengths_are_refused_before_waiting_for_them() -> None:
    prelude = struct.pack(">II", 64 * 1024 * 1024, 0)
    with pytest.raises(FrameError, match="impossible lengths"):
        FrameDecoder().feed(prelude + struct.pack(">I", zlib.crc32(prelude)))


def test_botocore_decodes_payload_parts_and_exceptions() -> None:
    buffer = EventStreamBuffer()
    buffer.add_data(payload_part(b'{"type": "done"}\n') + stream_exception("ModelStreamError", "boom"))
    first, second = (message.to_response_dict() for message in buffer)
    assert first["headers"][":event-type"] == "PayloadPart"
    assert first["headers"][":message-type"] == "event"
    assert first["body"] == b'{"type": "done"}\n'
    assert second["status_code"] == 400
    assert second["headers"][":exception-type"] == "ModelStreamError"
    assert json.loads(second["body"])["Message"] == "boom"


def test_lines_split_across_parts_and_packed_in_one_part() -> None:
    lines = LineAssembler()
    assert lines.feed(b'{"a": 1') == []
    assert lines.pending == b'{"a": 1'
    assert lines.feed(b'}\n{"b": 2}\n{"c"') == [b'{"a": 1}', b'{"b": 2}']
    assert lines.feed(b": 3}\n") == [b'{"c": 3}']
    assert lines.pending == b""


@pytest.mark.parametrize("line", [b'{"type": "chunk", "data": \n', b"[1, 2]", b"\xff{}", b"[" * 100_000])
def test_an_event_that_json_loads_refuses_or_that_is_not_an_object_is_malformed(line: bytes) -> None:
    with pytest.raises(MalformedEventError):
        decode_event(line)


# What orjson refuses and the standard library accepts: NaN (Python's json.dumps writes it), out-of-range
# floats, lone surrogates, a byte-order mark.
LIBERAL = [
    b'{"type": "chunk", "step_time": NaN}',
    b'{"type": "chunk", "step_time": -Infinity}',
    b'{"type": "chunk", "step_time": 1e400}',
    b'{"type": "chunk", "context_id": "\\ud800"}',
    b'\xef\xbb\xbf{"type": "done"}',
]


@pytest.mark.parametrize("line", LIBERAL)
def test_an_event_the_standard_library_accepts_is_not_malformed(line: bytes) -> None:
    event, expected = decode_event(line), json.loads(line)
    assert json.dumps(event) == json.dumps(expected)  # NaN != NaN: compared as text


def test_events_decode_from_bytes_and_text_alike() -> None:
    line = '{"type": "chunk", "data": "AAA=", "done": false, "context_id": "caf\u00e9"}'
    assert decode_event(line) == decode_event(line.encode()) == json.loads(line)
