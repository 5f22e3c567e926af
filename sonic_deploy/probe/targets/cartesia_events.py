"""The JSON events shared by the WebSocket API and the SageMaker stream, and how errors are named."""

from __future__ import annotations

from typing import Any

from sonic_deploy.client import cartesia_api
from sonic_deploy.client.cartesia_api import status_kind
from sonic_deploy.client.cartesia_ws import MalformedMessageError, decode_message
from sonic_deploy.probe.metrics import MalformedEventError, StreamRecorder

# Carry no audio and do not end a stream. Other types (a newer API version may add some) are counted on the
# stream as ignored, as the SDK ignores them, and the stream goes on.
_KNOWN_QUIET = frozenset({"timestamps", "phoneme_timestamps", "flush_done"})


def decode_event(text: str | bytes) -> dict[str, Any]:
    """One JSON event, parsed by the client core (`decode_message`); MalformedEventError if it is not one."""
    try:
        return decode_message(text)
    except MalformedMessageError as error:
        raise MalformedEventError(str(error)) from error


def apply_event(event: dict[str, Any], at: float, recorder: StreamRecorder) -> bool:
    """Account for one event received at `at`; True when the stream is finished (done or error)."""
    kind = event.get("type")
    if kind == "chunk":
        recorder.audio_b64(event.get("data"), at)
        finished = event.get("done") is True
    elif kind == "done":
        finished = True
    elif kind == "error":
        recorder.fail(status_kind("error_event", event.get("status_code")), cartesia_api.error_text(event))
        return True
    else:
        if kind not in _KNOWN_QUIET:
            recorder.ignored_events += 1
        finished = False
    if finished:
        recorder.done()
    return finished
