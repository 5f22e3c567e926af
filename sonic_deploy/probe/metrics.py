"""Per-request measurement (StreamRecorder) and per-level statistics in HDR histograms that merge exactly."""

from __future__ import annotations

import base64
import time
from typing import Any

import pybase64

from sonic_deploy.audio import BYTES_PER_SAMPLE, AudibleDetector, AudioFormat

_WAV_HEADER_BYTES = 12  # "RIFF", the file's length, "WAVE"


class MalformedEventError(Exception):
    """An event that cannot be understood (bad JSON, bad base64, missing fields)."""


def _ms(start: float | None, end: float | None) -> float | None:
    if start is None or end is None:
        return None
    return round((end - start) * 1000, 3)


class StreamRecorder:
    """Timestamps of one request, taken with `time.perf_counter()` (CLOCK_MONOTONIC, shared by processes)."""

    def __init__(
        self,
        *,
        audio: AudioFormat,
        scheduled_at: float,
        open_loop: bool,
        threshold_db: float | None = -40.0,
        playback_delay_ms: float = 0.0,
    ) -> None:
        self.audio = audio
        self.scheduled_at = scheduled_at
        self.open_loop = open_loop
        self.started_at = time.perf_counter()
        self.connect_ms: float | None = None
        self.sent_at: float | None = None
        self.last_piece_at: float | None = None  # an agent's turn: when its last piece of text left
        self.first_byte_at: float | None = None
        self.first_audible_at: float | None = None
        self.last_chunk_at: float | None = None
        self.end_at: float | None = None
        self.bytes = 0
        self.chunks = 0
        self.max_gap = 0.0
        self.underruns = 0
        self.underrun_time = 0.0
        # Messages of a type the probe does not know (a newer API version's), skipped.
        self.ignored_events = 0
        # WebSocket: messages for another context (or none) on this request's dedicated socket, dropped.
        self.foreign_messages = 0
        self.ok = False
        self.error: str | None = None
        self.detail: str | None = None
        self._detector = AudibleDetector(audio, threshold_db) if threshold_db is not None else None
        self._playback_delay = playback_delay_ms / 1000
        self._buffer_ends_at = 0.0
        self._head = b""  # the audio's first bytes, until there are enough to tell a WAV header

    def connected(self, seconds: float) -> None:
        self.connect_ms = round(seconds * 1000, 3)

    def sent(self) -> None:
        self.sent_at = time.perf_counter()

    def last_piece_sent(self) -> None:
        self.last_piece_at = time.perf_counter()

    def audio_b64(self, data: object, at: float) -> None:
        if not isinstance(data, str):
            raise MalformedEventError("chunk without base64 `data`")
        try:
            # pybase64 decodes at a tenth of the standard library's CPU, which every chunk of every stream
            # costs the event loop. It is stricter (it refuses padding after a whole group, "AAAA="): what
            # it refuses goes to the standard library, whose strict decoding has the last word.
            raw = pybase64.b64decode(data, validate=True)
        except ValueError:
            try:
                raw = base64.b64decode(data, validate=True)
            except ValueError as error:  # binascii.Error, or text that is not ASCII
                raise MalformedEventError(f"chunk data is not base64: {error}") from error
        self.audio_bytes(raw, at)

    def audio_bytes(self, data: bytes, at: float) -> None:
        """Account for one chunk of audio that arrived at `at`; simulate a player that starts at once.
        MalformedEventError for a WAV file's header: every route asks for raw samples (`container: raw`),
        and a header counted as audio would be heard as a click and inflate the audio's length."""
        if not data:
            return
        if self.bytes < _WAV_HEADER_BYTES:  # however the first chunks cut it (an HTTP body may, anywhere)
            self._head += data[: _WAV_HEADER_BYTES - self.bytes]
            if self._head[:4] == b"RIFF" and self._head[8:12] == b"WAVE":
                raise MalformedEventError(
                    "the audio begins with a WAV header where raw samples were asked for"
                )
        duration = len(data) / self.audio.bytes_per_second
        if self.first_byte_at is None:
            self.first_byte_at = at
            self._buffer_ends_at = at + self._playback_delay
        elif self.last_chunk_at is not None:
            self.max_gap = max(self.max_gap, at - self.last_chunk_at)
        if at > self._buffer_ends_at:
            # The player ran dry before this chunk arrived: a caller hears silence.
            self.underruns += 1
            self.underrun_time += at - self._buffer_ends_at
            self._buffer_ends_at = at
        self._buffer_ends_at += duration
        if self._detector is not None and self.first_audible_at is None and self._detector.feed(data):
            self.first_audible_at = at
        self.last_chunk_at = at
        self.bytes += len(data)
        self.chunks += 1

    def fail(self, kind: str, detail: str = "") -> None:
        """Record the first failure; later ones are consequences of it."""
        if self.error is None:
            self.error, self.detail = kind, detail[:300]
        self.ok = False
        self.end_at = self.end_at or time.perf_counter()

    def done(self) -> None:
        """The stream ended as the protocol ends it (`done`, the end of an HTTP body). Without audio it is
        `no_audio`, not `ok`: a caller heard nothing (an error-free stream of no audio is a server fault,
        or a transcript with nothing to say, which the probe never sends). Audio that is not whole samples
        of the encoding asked for is `malformed`: a player would misread every sample after the cut."""
        if self.error is None and self.chunks == 0:
            self.fail("no_audio", "the stream ended without audio")
        elif self.error is None and self.bytes % BYTES_PER_SAMPLE[self.audio.encoding]:
            width = BYTES_PER_SAMPLE[self.audio.encoding]
            self.fail("malformed", f"{self.bytes} bytes of audio is not whole {width}-byte samples")
        self.end_at = time.perf_counter()
        if self.error is None:
            self.ok = True

    @property
    def origin(self) -> float | None:
        """Latency is measured from the scheduled start in an open loop (no coordinated omission), or from
        the actual start if a coarse timer started the request a little before its time."""
        return min(self.scheduled_at, self.started_at) if self.open_loop else self.sent_at

    def record(self) -> dict[str, Any]:
        audio_s = self.bytes / self.audio.bytes_per_second
        generation = None if self.sent_at is None or self.end_at is None else self.end_at - self.sent_at
        return {
            "ok": self.ok,
            "error": self.error,
            "detail": self.detail,
            "ttfa_ms": _ms(self.origin, self.first_byte_at),
            "ttfa_audible_ms": _ms(self.origin, self.first_audible_at),
            "service_ttfa_ms": _ms(self.sent_at, self.first_byte_at),
            # From the turn's last piece of text; negative when audio began before the LLM had finished.
            "ttfa_last_piece_ms": _ms(self.last_piece_at, self.first_byte_at),
            "connect_ms": self.connect_ms,
            "total_ms": _ms(self.origin, self.end_at),
            "late_ms": max(0.0, _ms(self.scheduled_at, self.started_at) or 0.0) if self.open_loop else None,
            "audio_ms": round(audio_s * 1000, 3),
            "rtf": round(generation / audio_s, 4) if generation is not None and audio_s > 0 else None,
            "max_gap_ms": round(self.max_gap * 1000, 3) if self.chunks > 1 else None,
            "underruns": self.underruns,
            "underrun_ms": round(self.underrun_time * 1000, 3),
            "chunks": self.chunks,
            "bytes": self.bytes,
            "ignored_events": self.ignored_events,
            "foreign_messages": self.foreign_messages,
        }
