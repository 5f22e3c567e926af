"""Event-stream frames that botocore's own decoder reads, and JSON lines reassembled across parts."""

from __future__ import annotations

import json

from botocore.eventstream import EventStreamBuffer

from sonic_deploy.probe.eventstream import LineAssembler, payload_part, stream_exception


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
