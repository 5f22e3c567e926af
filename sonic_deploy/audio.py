"""Just enough audio: the output formats the API takes, G.711 tables, a detector for the first audible sample,
a test tone for the stand-in server."""

from __future__ import annotations

import bisect
import math
import struct
import sys
from array import array
from dataclasses import dataclass
from functools import cache
from typing import Any

from sonic_deploy.client import cartesia_api

ENCODINGS = cartesia_api.ENCODINGS
SAMPLE_RATES = cartesia_api.SAMPLE_RATES
BYTES_PER_SAMPLE = {"pcm_s16le": 2, "pcm_f32le": 4, "pcm_mulaw": 1, "pcm_alaw": 1}


@dataclass(frozen=True)
class AudioFormat:
    encoding: str = "pcm_s16le"
    sample_rate: int = 44100

    def __post_init__(self) -> None:
        if self.encoding not in BYTES_PER_SAMPLE:
            raise ValueError(f"unknown encoding {self.encoding!r}: use one of {', '.join(ENCODINGS)}")
        if self.sample_rate not in SAMPLE_RATES:
            rates = ", ".join(map(str, SAMPLE_RATES))
            raise ValueError(f"sample rate {self.sample_rate} is not one the API accepts: {rates}")

    @property
    def bytes_per_second(self) -> int:
        return BYTES_PER_SAMPLE[self.encoding] * self.sample_rate

    def as_output_format(self) -> dict[str, Any]:
        return {"container": "raw", "encoding": self.encoding, "sample_rate": self.sample_rate}


FULL_SCALE = 32768.0
# Speech, for the turn's caller audio and the speech-to-text stand-ins alike: a sample this loud or louder.
# eSpeak's quietest voiced sounds sit well above it, and a phone line's idle noise (around -60 dBFS) below.
SPEECH_THRESHOLD_DB = -40.0


def _mulaw_to_linear(byte: int) -> int:
    value = ~byte & 0xFF
    magnitude = ((((value & 0x0F) << 3) + 0x84) << ((value >> 4) & 0x07)) - 0x84
    return -magnitude if value & 0x80 else magnitude


def _alaw_to_linear(byte: int) -> int:
    value = byte ^ 0x55
    exponent, mantissa = (value >> 4) & 0x07, value & 0x0F
    magnitude = (mantissa << 4) + 8 if exponent == 0 else ((mantissa << 4) + 0x108) << (exponent - 1)
    return magnitude if value & 0x80 else -magnitude


MULAW_TABLE: tuple[int, ...] = tuple(_mulaw_to_linear(b) for b in range(256))
ALAW_TABLE: tuple[int, ...] = tuple(_alaw_to_linear(b) for b in range(256))


def decode_samples(encoding: str, data: bytes) -> list[float] | array[int] | array[float]:
    """Samples on a 16-bit scale (floats are scaled up)."""
    if encoding == "pcm_s16le":
        samples = array("h", data)
        if sys.byteorder == "big":
            samples.byteswap()
        return samples
    if encoding == "pcm_f32le":
        return [value * FULL_SCALE for value in struct.unpack(f"<{len(data) // 4}f", data)]
    table = MULAW_TABLE if encoding == "pcm_mulaw" else ALAW_TABLE
    return array("i", (table[b] for b in data))


class AudibleDetector:
    """Finds the first sample whose magnitude reaches `threshold_db` dBFS, across chunk boundaries."""

    def __init__(self, audio: AudioFormat, threshold_db: float) -> None:
        self._encoding = audio.encoding
        self._width = BYTES_PER_SAMPLE[audio.encoding]
        self._threshold = FULL_SCALE * 10 ** (threshold_db / 20)
        self._carry = b""
        self.found = False
        # Samples of the stream before the first audible one (so far, until it is found).
        self.samples_before = 0

    def feed(self, data: bytes) -> bool:
        """True once an audible sample has been seen (in this chunk or before)."""
        if self.found:
            return True
        data = self._carry + data
        whole = len(data) - len(data) % self._width
        self._carry = data[whole:]
        samples = decode_samples(self._encoding, data[:whole])
        if samples and max(max(samples), -min(samples)) >= self._threshold:
            self.found = True
            self.samples_before += next(i for i, value in enumerate(samples) if abs(value) >= self._threshold)
        else:
            self.samples_before += len(samples)
        return self.found


@cache
def nearest_code(encoding: str, value: int) -> int:
    table = MULAW_TABLE if encoding == "pcm_mulaw" else ALAW_TABLE
    ordered = sorted((linear, code) for code, linear in enumerate(table))
    index = bisect.bisect_left(ordered, (value, -1))
    candidates = ordered[max(0, index - 1) : index + 1]
    return min(candidates, key=lambda pair: abs(pair[0] - value))[1]


@cache
def tone(audio: AudioFormat, duration_ms: int, silent: bool, level_db: float = -12.0) -> bytes:
    """A 440 Hz tone (or silence) of `duration_ms` in `audio`'s encoding (the server sends the same few
    chunks again and again: each is made once)."""
    count = audio.sample_rate * duration_ms // 1000
    amplitude = 0.0 if silent else 10 ** (level_db / 20)
    values = [amplitude * math.sin(2 * math.pi * 440 * i / audio.sample_rate) for i in range(count)]
    if audio.encoding == "pcm_f32le":
        return struct.pack(f"<{count}f", *values)
    ints = [round(v * (FULL_SCALE - 1)) for v in values]
    if audio.encoding == "pcm_s16le":
        return struct.pack(f"<{count}h", *ints)
    return bytes(nearest_code(audio.encoding, v) for v in ints)
