"""Request bodies for the three routes, built from one template (see domain.md sections 1 and 2)."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_VOICE_ID = "6ccbfb76-1fc6-48f7-b71d-91ac6298247b"
DEFAULT_MODEL_ID = "sonic-3"
DEFAULT_CARTESIA_VERSION = "2025-04-16"
DEFAULT_TRANSCRIPT = (
    "Thanks for calling. Your appointment is confirmed for Tuesday at three in the afternoon."
)
ENCODINGS = ("pcm_s16le", "pcm_f32le", "pcm_mulaw", "pcm_alaw")
BYTES_PER_SAMPLE = {"pcm_s16le": 2, "pcm_f32le": 4, "pcm_mulaw": 1, "pcm_alaw": 1}

# Named output formats: `telephony` is what a phone line carries (8 kHz mu-law).
PRESETS: dict[str, tuple[str, int]] = {
    "studio": ("pcm_s16le", 44100),
    "telephony": ("pcm_mulaw", 8000),
}


@dataclass(frozen=True)
class AudioFormat:
    encoding: str = "pcm_s16le"
    sample_rate: int = 44100

    def __post_init__(self) -> None:
        if self.encoding not in BYTES_PER_SAMPLE:
            raise ValueError(f"unknown encoding {self.encoding!r}: use one of {', '.join(ENCODINGS)}")
        if not 8000 <= self.sample_rate <= 48000:
            raise ValueError(f"sample rate {self.sample_rate} is outside 8000-48000")

    @property
    def bytes_per_second(self) -> int:
        return BYTES_PER_SAMPLE[self.encoding] * self.sample_rate

    def as_output_format(self) -> dict[str, Any]:
        return {"container": "raw", "encoding": self.encoding, "sample_rate": self.sample_rate}


@dataclass(frozen=True)
class RequestTemplate:
    """What every request of a run asks for; only the transcript and the context id vary."""

    transcripts: tuple[str, ...] = (DEFAULT_TRANSCRIPT,)
    voice_id: str = DEFAULT_VOICE_ID
    model_id: str = DEFAULT_MODEL_ID
    language: str = "en"
    audio: AudioFormat = field(default_factory=AudioFormat)

    def body(self, transcript: str, context_id: str, route: str) -> dict[str, Any]:
        """The JSON body for `route` in {"ws", "http", "sagemaker"}."""
        body: dict[str, Any] = {
            "transcript": transcript,
            "voice": {"mode": "id", "id": self.voice_id},
            "output_format": self.audio.as_output_format(),
            "language": self.language,
        }
        if route == "sagemaker":
            body["context_id"] = context_id
        elif route == "ws":
            body.update(model_id=self.model_id, context_id=context_id, **{"continue": False})
        else:
            body["model_id"] = self.model_id
        return body

    def cycle(self) -> Iterator[str]:
        return itertools.cycle(self.transcripts)


def new_context_id() -> str:
    return uuid.uuid4().hex


def load_transcripts(text: str | None, path: Path | None) -> tuple[str, ...]:
    """Transcripts from `--transcript` or from a file of lines (blank lines skipped)."""
    if path is not None:
        lines = tuple(line.strip() for line in path.read_text(encoding="utf-8").splitlines())
        found = tuple(line for line in lines if line)
        if not found:
            raise ValueError(f"{path} holds no transcript (one per line expected)")
        return found
    return (text,) if text else (DEFAULT_TRANSCRIPT,)
