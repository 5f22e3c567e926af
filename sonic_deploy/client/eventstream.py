"""The SageMaker runtime's response-stream framing: AWS event-stream frames around newline-delimited JSON.

The server side encodes frames (boto3's own decoder reads them in the tests). The client side decodes
them (`FrameDecoder`, checked against botocore's decoder in the tests) and reassembles JSON lines that
arrive split across `PayloadPart`s or packed several to a part.
"""

from __future__ import annotations

import json
import struct
import uuid
import zlib

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_STRING = 7
_PRELUDE = struct.Struct(">III")
_CRC = struct.Struct(">I")
# The limits AWS documents for one message: 16 MiB in all, 128 KiB of headers.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
MAX_HEADERS_BYTES = 128 * 1024
# Header value types: fixed widths, and the two with a 2-byte length before them (bytes, string).
_FIXED = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}
_SIGNED = {2: ">b", 3: ">h", 4: ">i", 5: ">q", 8: ">q"}

HeaderValue = bool | int | bytes | str


def _crc(data: bytes | memoryview) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def encode_headers(headers: dict[str, str]) -> bytes:
    return b"".join(
        struct.pack("B", len(name)) + name.encode() + struct.pack(">BH", _STRING, len(value)) + value.encode()
        for name, value in headers.items()
    )


def encode_frame(headers: dict[str, str] | bytes, payload: bytes) -> bytes:
    """One event-stream message: prelude (lengths + CRC), string headers, payload, message CRC."""
    encoded = headers if isinstance(headers, bytes) else encode_headers(headers)
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    message = prelude + struct.pack(">I", _crc(prelude)) + encoded + payload
    return message + struct.pack(">I", _crc(message))


_PAYLOAD_PART_HEADERS = encode_headers(
    {":event-type": "PayloadPart", ":content-type": "application/octet-stream", ":message-type": "event"}
)


def payload_part(data: bytes) -> bytes:
    return encode_frame(_PAYLOAD_PART_HEADERS, data)


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


class FrameError(ValueError):
    """Bytes that are not a well-formed event-stream message (lengths or checksums do not add up)."""


def _parse_headers(raw: bytes) -> dict[str, HeaderValue]:
    headers: dict[str, HeaderValue] = {}
    at = 0
    try:
        while at < len(raw):
            size = raw[at]
            name = raw[at + 1 : at + 1 + size].decode()
            kind = raw[at + 1 + size]
            at += 2 + size
            value: HeaderValue
            if kind in _FIXED:
                width = _FIXED[kind]
                chunk = raw[at : at + width]
                if len(chunk) != width:
                    raise FrameError(f"header {name!r} is cut short")
                if kind in (0, 1):
                    value = kind == 0
                elif kind == 9:
                    value = str(uuid.UUID(bytes=chunk))
                else:
                    value = struct.unpack(_SIGNED[kind], chunk)[0]
                at += width
            elif kind in (6, _STRING):
                (length,) = struct.unpack_from(">H", raw, at)
                data = raw[at + 2 : at + 2 + length]
                if len(data) != length:
                    raise FrameError(f"header {name!r} is cut short")
                value = data.decode() if kind == _STRING else data
                at += 2 + length
            else:
                raise FrameError(f"header {name!r} has unknown type {kind}")
            headers[name] = value
    except (IndexError, struct.error, UnicodeDecodeError) as error:
        raise FrameError(f"bad headers: {error}") from error
    return headers


class FrameDecoder:
    """Event-stream messages out of bytes as they arrive, each checked against both of its checksums.

    The headers of a stream's messages repeat (every `PayloadPart` carries the same three), so each
    distinct header block is parsed once: this is most of the work, per message, of a generic decoder.
    """

    _CACHE_LIMIT = 64

    def __init__(self) -> None:
        # The start of a message whose end has not arrived yet, in pieces, and the bytes it needs in all
        # (its prelude's 12, then its total length): pieces are joined once, when enough are in.
        self._pieces: list[bytes] = []
        self._held = 0
        self._needed = 0
        self._headers: dict[bytes, dict[str, HeaderValue]] = {}

    def feed(self, data: bytes) -> list[tuple[dict[str, HeaderValue], bytes]]:
        """The (headers, payload) of every message completed by `data`; FrameError if one is bad.

        Messages are read in place (checksums over memoryviews): the only copies are each payload, and
        a message that arrives in several reads, joined once."""
        if self._pieces:
            self._pieces.append(data)
            self._held += len(data)
            if self._held < self._needed:
                return []
            data = b"".join(self._pieces)
            self._pieces, self._held = [], 0
        view = memoryview(data)
        end, at = len(data), 0
        needed = _PRELUDE.size
        messages: list[tuple[dict[str, HeaderValue], bytes]] = []
        while end - at >= _PRELUDE.size:
            total, headers_length, prelude_crc = _PRELUDE.unpack_from(data, at)
            if _crc(view[at : at + 8]) != prelude_crc:
                raise FrameError("prelude checksum mismatch")
            if total > MAX_MESSAGE_BYTES or headers_length > MAX_HEADERS_BYTES or total < 16 + headers_length:
                raise FrameError(f"impossible lengths: message {total}, headers {headers_length}")
            stop = at + total
            if stop > end:
                needed = total
                break
            if _crc(view[at : stop - 4]) != _CRC.unpack_from(data, stop - 4)[0]:
                raise FrameError("message checksum mismatch")
            payload_at = at + 12 + headers_length
            raw = data[at + 12 : payload_at]
            headers = self._headers.get(raw)
            if headers is None:
                headers = _parse_headers(raw)
                if len(self._headers) < self._CACHE_LIMIT:
                    self._headers[raw] = headers
            messages.append((headers, data[payload_at : stop - 4]))
            at = stop
        if at < end:
            rest = data[at:] if at else data
            self._pieces, self._held, self._needed = [rest], len(rest), needed
        return messages
