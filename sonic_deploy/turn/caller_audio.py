"""The caller's side of a simulated call: WAV files read, the end of speech found in them, cut into frames.

The shipped utterances (`utterances/`, made by `scripts/make_utterances.sh`) come in two forms: `telephony`
(8 kHz G.711 mu-law, what a phone line carries) and `wideband` (16 kHz 16-bit PCM). A user's own WAV files
may be 16-bit PCM or G.711 mu-law, mono, at any rate the speech-to-text service accepts. The end of speech
is a fact of the file, not a guess: the time of its last sample at or above `SPEECH_THRESHOLD_DB`.
"""

from __future__ import annotations

import struct
import sys
from array import array
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

from sonic_deploy.audio import FULL_SCALE, MULAW_TABLE, SPEECH_THRESHOLD_DB, decode_samples
from sonic_deploy.user_files import RefusedFileError, read_regular

# A caller utterance is seconds long (48 kHz 16-bit mono is 96 kB a second): 64 MiB is over ten minutes.
MAX_WAV_BYTES = 64 * 2**20

SHIPPED = {"telephony": "8k-mulaw", "wideband": "16k"}
_FORMAT_PCM, _FORMAT_MULAW, _FORMAT_EXTENSIBLE = 1, 7, 0xFFFE
_SILENCE = {"pcm_s16le": b"\x00\x00", "pcm_mulaw": b"\xff"}


class CallerAudioError(ValueError):
    """A WAV file that cannot be played to the service; the message names the file, the problem and the fix."""


@dataclass(frozen=True)
class CallerAudio:
    name: str
    encoding: str  # pcm_s16le or pcm_mulaw
    sample_rate: int
    data: bytes
    speech_end_s: float  # from the start of the file: the end of its last voiced sample
    speech_start_s: float = 0.0  # the start of its first voiced sample

    @property
    def bytes_per_sample(self) -> int:
        return 2 if self.encoding == "pcm_s16le" else 1

    @property
    def duration_s(self) -> float:
        return len(self.data) / self.bytes_per_sample / self.sample_rate

    def frames(self, frame_ms: int) -> list[bytes]:
        """The file in frames of `frame_ms` (the last one padded with silence)."""
        size = self.sample_rate * frame_ms // 1000 * self.bytes_per_sample
        frames = [self.data[at : at + size] for at in range(0, len(self.data), size)]
        if frames and len(frames[-1]) < size:
            frames[-1] += silence(self.encoding, (size - len(frames[-1])) // self.bytes_per_sample)
        return frames

    def as_pcm16(self) -> CallerAudio:
        """The same audio as 16-bit PCM (for a service that takes no mu-law, such as Amazon Transcribe)."""
        if self.encoding == "pcm_s16le":
            return self
        samples = array("h", (MULAW_TABLE[code] for code in self.data))
        if sys.byteorder == "big":
            samples.byteswap()
        return replace(self, encoding="pcm_s16le", data=samples.tobytes())


def silence(encoding: str, samples: int) -> bytes:
    return _SILENCE[encoding] * samples


def speech_start_s(encoding: str, sample_rate: int, data: bytes) -> float:
    """The start of the first sample at or above the speech threshold, in seconds from the start (0 if none)."""
    threshold = FULL_SCALE * 10 ** (SPEECH_THRESHOLD_DB / 20)
    samples = decode_samples(encoding, data[: len(data) - len(data) % (2 if encoding == "pcm_s16le" else 1)])
    return next((index / sample_rate for index, value in enumerate(samples) if abs(value) >= threshold), 0.0)


def speech_end_s(encoding: str, sample_rate: int, data: bytes) -> float | None:
    """The end of the last sample at or above the speech threshold, in seconds from the start; None if silent."""
    threshold = FULL_SCALE * 10 ** (SPEECH_THRESHOLD_DB / 20)
    samples = decode_samples(encoding, data[: len(data) - len(data) % (2 if encoding == "pcm_s16le" else 1)])
    for index in range(len(samples) - 1, -1, -1):
        if abs(samples[index]) >= threshold:
            return (index + 1) / sample_rate
    return None


def _chunks(raw: bytes, path: Path) -> dict[bytes, bytes]:
    if len(raw) < 12 or raw[:4] != b"RIFF" or raw[8:12] != b"WAVE":
        raise CallerAudioError(f"{path}: not a WAV file (no RIFF/WAVE header). Fix: give a .wav file")
    chunks: dict[bytes, bytes] = {}
    at = 12
    while at + 8 <= len(raw):
        ident, size = raw[at : at + 4], struct.unpack_from("<I", raw, at + 4)[0]
        chunks.setdefault(ident, raw[at + 8 : at + 8 + size])
        at += 8 + size + (size & 1)
    return chunks


def read_wav(path: Path) -> CallerAudio:
    """A mono 16-bit PCM or G.711 mu-law WAV file; CallerAudioError names what is wrong and how to fix it."""
    try:  # the size first: an 8 GiB file is refused from it, not read into memory
        raw = read_regular(path, limit=MAX_WAV_BYTES)
    except RefusedFileError as error:
        raise CallerAudioError(
            f"{path}: cannot read it ({error.problem}). Fix: pass a WAV file of one utterance"
        ) from None
    chunks = _chunks(raw, path)
    fmt, data = chunks.get(b"fmt "), chunks.get(b"data")
    if fmt is None or len(fmt) < 16 or data is None:
        raise CallerAudioError(f"{path}: a WAV file without its fmt or data chunk. Fix: re-export it")
    tag, channels, rate, _, _, bits = struct.unpack_from("<HHIIHH", fmt)
    if rate < 8000:
        raise CallerAudioError(
            f"{path}: a sample rate of {rate} Hz in its header; 8000 Hz or more is needed. Fix: re-export it"
        )
    if tag == _FORMAT_EXTENSIBLE and len(fmt) >= 26:
        tag = struct.unpack_from("<H", fmt, 24)[0]  # the sub-format GUID starts with the format tag
    convert = f"Fix: sox {path} -r 16000 -c 1 -b 16 -e signed-integer OUT.wav"
    if channels != 1:
        raise CallerAudioError(f"{path}: {channels} channels; the caller is one. {convert}")
    if tag == _FORMAT_PCM and bits == 16:
        encoding = "pcm_s16le"
    elif tag == _FORMAT_MULAW and bits == 8:
        encoding = "pcm_mulaw"
    else:
        raise CallerAudioError(
            f"{path}: format {tag} with {bits}-bit samples; 16-bit PCM or 8-bit mu-law is needed. {convert}"
        )
    end = speech_end_s(encoding, rate, data)
    if end is None:
        raise CallerAudioError(
            f"{path}: no sample reaches {SPEECH_THRESHOLD_DB:g} dBFS, so there is no speech to time. "
            "Fix: a recording of the caller speaking"
        )
    return CallerAudio(path.stem, encoding, rate, data, end, speech_start_s(encoding, rate, data))


def shipped(kind: str) -> list[CallerAudio]:
    """The shipped utterances of one form (`telephony` or `wideband`), in conversation order."""
    suffix = SHIPPED[kind]
    folder = resources.files("sonic_deploy.turn") / "utterances"
    order = ("book", "time", "thanks")
    with resources.as_file(folder) as path:
        return [read_wav(path / f"{name}-{suffix}.wav") for name in order]
