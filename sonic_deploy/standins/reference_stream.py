"""The reference server's behaviour, apart from any wire format: when each chunk goes out, and which faults.

It stands in for Sonic to measure the probe, not Sonic: every delay here is one the server was told to make.
"""

from __future__ import annotations

import asyncio
import base64
import math
import random
from collections import Counter, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from sonic_deploy.audio import AudioFormat, tone
from sonic_deploy.client import cartesia_api
from sonic_deploy.event_loop import sleep_until

# Faults, checked in this order; `every` N-th admitted stream (counted from 1 across all protocols) gets one.
FAULTS = ("reset", "stall", "malformed", "error", "stream_error", "status500", "status422")
PART_LAYOUTS = ("aligned", "split", "packed", "mixed")


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 0
    first_byte_ms: float = 90.0
    jitter_ms: float = 0.0
    chunk_ms: int = 20
    pace: float = 0.5
    audio_ms: int | None = None
    ms_per_char: float = 60.0
    leading_silence_ms: int = 0
    capacity: int | None = None
    faults: dict[str, int] = field(default_factory=dict)
    stall_ms: float = 2000.0
    parts: str = "aligned"
    api_key: str | None = None
    # A refused context's 429 names no context, and each further piece sent for it gets another (a server
    # the clients must not take at its word; issue 31's "429 without context_id").
    unnamed_refusals: bool = False
    # What a continued context waits for more text when the request names no max_buffer_delay_ms (see
    # cartesia_api: the documented default).
    default_buffer_delay_ms: float = cartesia_api.DEFAULT_BUFFER_DELAY_MS
    seed: int = 1
    exit_after_s: float | None = None
    # HTTPS and wss:// with this certificate chain and its private key (PEM), both or neither.
    tls_cert: str | None = None
    tls_key: str | None = None
    # The language-model stand-in (llm.py): its first token this long after a request, then this pace.
    llm_first_token_ms: float = 400.0
    llm_tokens_per_s: float = 50.0
    # The speech-to-text stand-ins (stt.py): the final transcript this long after the speech ends,
    # and its text (None: stt.TRANSCRIPT).
    stt_final_ms: float = 300.0
    stt_transcript: str | None = None

    def __post_init__(self) -> None:
        unknown = set(self.faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault {sorted(unknown)}: use {', '.join(FAULTS)}")
        if self.parts not in PART_LAYOUTS:
            raise ValueError(f"unknown part layout {self.parts!r}: use {', '.join(PART_LAYOUTS)}")
        if self.chunk_ms <= 0 or self.pace < 0:
            raise ValueError("chunk_ms must be > 0 and pace >= 0")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together: give both, or neither")


class BadRequestError(Exception):
    """The request body cannot be served (the real API answers 422)."""


@dataclass(frozen=True)
class Event:
    """One step of a stream: `chunk` (audio), `done`, or a fault to render in the protocol's own way."""

    kind: str
    audio: bytes = b""
    b64: str = ""
    due: float = 0.0  # when the schedule wanted it out (loop clock)


@dataclass(frozen=True)
class Generation:
    """One generation request (or one piece of a continued context) as the server reads it."""

    transcript: str
    audio: AudioFormat
    context_id: str
    container: str = "raw"
    more: bool = False  # `continue`: more pieces of this context follow
    flush: bool = False
    max_buffer_delay_ms: float | None = None
    timestamps: bool = False


def parse_request(body: Any, require_context: bool, containers: tuple[str, ...] = ("raw",)) -> Generation:
    """A generation request in any form the API accepts (cartesia_api), or BadRequestError naming the field.

    An empty transcript is accepted only where it can mean something: as the end of a continued context
    (`continue: false`) on a socket (`require_context`); a single HTTP request must say something."""
    if not isinstance(body, dict):
        raise BadRequestError("body must be a JSON object")
    transcript = body.get("transcript")
    more = body.get("continue", False)
    if not isinstance(more, bool):
        raise BadRequestError("continue must be true or false")
    if not isinstance(transcript, str) or (not transcript.strip() and not require_context):
        raise BadRequestError("transcript must be a non-empty string")
    output = body.get("output_format")
    if isinstance(output, dict) and output.get("container") == "mp3" and "mp3" in containers:
        raise BadRequestError("output_format.container: the stand-in does not encode mp3: ask for raw or wav")
    try:
        cartesia_api.voice_id(body.get("voice"))
        container, encoding, rate = cartesia_api.check_output_format(output, containers)
    except cartesia_api.ApiRequestError as error:
        raise BadRequestError(str(error)) from error
    context_id = body.get("context_id")
    if require_context and not (isinstance(context_id, str) and context_id):
        raise BadRequestError("context_id is required")
    delay = body.get("max_buffer_delay_ms")
    if delay is not None and (
        isinstance(delay, bool)
        or not isinstance(delay, int | float)
        or not 0 <= delay <= cartesia_api.MAX_BUFFER_DELAY_MS
    ):
        raise BadRequestError(f"max_buffer_delay_ms must be 0-{cartesia_api.MAX_BUFFER_DELAY_MS}")
    return Generation(
        transcript=transcript,
        audio=AudioFormat(encoding, rate),
        context_id=str(context_id or ""),
        container=container,
        more=more,
        flush=body.get("flush") is True,
        max_buffer_delay_ms=None if delay is None else float(delay),
        timestamps=body.get("add_timestamps") is True,
    )


class ReferenceBehaviour:
    """Admission (capacity), fault choice, and the timed sequence of events of each stream."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.active = 0
        self.admitted = 0
        self.counts: Counter[str] = Counter()
        # How late the first chunk left, against the delay the server was told to make (its own error).
        self.first_byte_lateness: deque[float] = deque(maxlen=100_000)
        self._random = random.Random(config.seed)

    def admit(self) -> str | None:
        """None if over capacity (429); otherwise the fault for this stream ("" for none)."""
        if self.config.capacity is not None and self.active >= self.config.capacity:
            self.counts["over_capacity"] += 1
            return None
        self.active += 1
        self.admitted += 1
        self.counts["admitted"] += 1
        for fault in FAULTS:
            every = self.config.faults.get(fault)
            if every and self.admitted % every == 0:
                self.counts[f"fault_{fault}"] += 1
                return fault
        return ""

    def release(self, completed: bool) -> None:
        self.active -= 1
        self.counts["completed" if completed else "interrupted"] += 1

    def audio_ms(self, transcript: str) -> int:
        config = self.config
        wanted = config.audio_ms if config.audio_ms is not None else len(transcript) * config.ms_per_char
        return max(config.chunk_ms, int(wanted))

    async def events(
        self,
        transcript: str,
        audio: AudioFormat,
        fault: str,
        arrived: float,
        not_before: float = 0.0,
        first_piece: bool = True,
    ) -> AsyncIterator[Event]:
        """Chunks on a fixed schedule from the request's arrival (`arrived`, on the loop's clock: taken
        before the request is parsed and answered, so that neither delays the first byte); faults mid-way.

        A later piece of a continued context starts no earlier than `not_before` (just after the previous
        piece's last chunk): one context is one audio stream. Only a context's first piece is counted in the
        server's own lateness, and only it carries the stream's fault."""
        config = self.config
        loop = asyncio.get_running_loop()
        first = arrived + (config.first_byte_ms + self._random.uniform(0, config.jitter_ms)) / 1000
        first = max(first, not_before)
        count = math.ceil(self.audio_ms(transcript) / config.chunk_ms)
        silent_chunks = math.ceil(config.leading_silence_ms / config.chunk_ms) if first_piece else 0
        interval = config.chunk_ms * config.pace / 1000
        fault_at = max(1, count // 2)
        stalled = 0.0
        for index in range(count):
            if index == fault_at and fault in ("reset", "malformed", "error", "stream_error"):
                yield Event(fault)
                if fault != "malformed":
                    return
            if index == fault_at and fault == "stall":
                stalled = config.stall_ms / 1000
            due = first + index * interval + stalled
            if index == 0 and first_piece:
                await sleep_until(
                    due
                )  # the first byte, which every probe measures: on time, not a timer late
            elif (delay := due - loop.time()) > 0:
                await asyncio.sleep(delay)
            raw = tone(audio, config.chunk_ms, index < silent_chunks)
            yield Event("chunk", raw, _b64(raw), due)
            if index == 0 and first_piece:  # resumed once the first chunk was handed to the socket
                self.first_byte_lateness.append(loop.time() - first)
        yield Event("done", due=first + count * interval + stalled)

    def stream_bytes(self, transcript: str, audio: AudioFormat) -> int:
        """How many audio bytes a fault-free stream of `transcript` carries (a WAV header says so)."""
        count = math.ceil(self.audio_ms(transcript) / self.config.chunk_ms)
        return count * len(tone(audio, self.config.chunk_ms, False))

    def lateness_ms(self) -> dict[str, float | int | None]:
        ordered = sorted(self.first_byte_lateness)
        if not ordered:
            return {"count": 0, "p50": None, "p99": None, "max": None}

        def at(fraction: float) -> float:
            return round(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000, 3)

        return {"count": len(ordered), "p50": at(0.5), "p99": at(0.99), "max": at(1.0)}


_B64: dict[bytes, str] = {}


def _b64(raw: bytes) -> str:
    # The same few chunk payloads are sent again and again: encode each once.
    if raw not in _B64:
        _B64[raw] = base64.b64encode(raw).decode()
    return _B64[raw]
