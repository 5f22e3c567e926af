"""The SageMaker runtime's response-stream framing: AWS event-stream frames around newline-delimited JSON.

The server side encodes frames (boto3's own decoder reads them in the tests); the client side reassembles
JSON lines that arrive split across `PayloadPart`s or packed several to a part.
"""

from __future__ import annotations

import json
import struct
import zlib

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_STRING = 7


def _crc(data: bytes) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def encode_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message: prelude (lengths + CRC), string headers, payload, message CRC."""
    encoded = b"".join(
        struct.pack("B", len(name)) + name.encode() + struct.pack(">BH", _STRING, len(value)) + value.encode()
        for name, value in ((k, v) for k, v in headers.items())
    )
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    message = prelude + struct.pack(">I", _crc(prelude)) + encoded + payload
    return message + struct.pack(">I", _crc(message))


def payload_part(data: bytes) -> bytes:
    headers = {
        ":event-type": "PayloadPart",
        ":content-type": "application/octet-stream",
        ":message-type": "event",
    }
    return encode_frame(headers, data)


def stream_exception(kind: str, message: str) -> bytes:
    """A mid-stream failure such as `ModelStreamError` or `InternalStreamFailure`."""
    headers = {":exception-type": kind, ":content-type": "application/json", ":message-type": "exception"}
    return encode_frame(headers, json.dumps({"Message": message, "ErrorCode": kind}).encode())


class LineAssembler:
    """Buffers bytes until `\\n`: one JSON event may span parts and one part may hold several events."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> list[bytes]:
        lines = (self._pending + data).split(b"\n")
        self._pending = lines.pop()
        return [line for line in lines if line.strip()]

    @property
    def pending(self) -> bytes:
        """Bytes of an event that has not been terminated yet (non-empty at the end means a cut stream)."""
        return self._pending
