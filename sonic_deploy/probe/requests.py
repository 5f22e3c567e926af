"""Request bodies for the three routes, built from one template (see domain.md sections 1 and 2)."""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sonic_deploy.audio import AudioFormat
from sonic_deploy.client import cartesia_api
from sonic_deploy.probe.wires import WIRES
from sonic_deploy.routes import Wire

DEFAULT_VOICE_ID = "6ccbfb76-1fc6-48f7-b71d-91ac6298247b"
DEFAULT_MODEL_ID = "sonic-3"
DEFAULT_CARTESIA_VERSION = cartesia_api.CURRENT_API_VERSION
DEFAULT_TRANSCRIPT = (
    "Thanks for calling. Your appointment is confirmed for Tuesday at three in the afternoon."
)

# Named output formats: `telephony` is what a phone line carries (8 kHz mu-law).
PRESETS: dict[str, tuple[str, int]] = {
    "studio": ("pcm_s16le", 44100),
    "telephony": ("pcm_mulaw", 8000),
}


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
        if WIRES[route] is Wire.SAGEMAKER:
            body["context_id"] = context_id
        elif route == "ws":
            body.update(model_id=self.model_id, context_id=context_id, **{"continue": False})
        else:
            body["model_id"] = self.model_id
        return body

    def cycle(self) -> Iterator[str]:
        return itertools.cycle(self.transcripts)


SPLITS = ("sentence", "word")
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")


def split_pieces(transcript: str, how: str) -> list[str]:
    """A transcript as an agent sends it: sentence by sentence (as pipecat's and LiveKit's sentence
    aggregators hand text on), or word by word (as an LLM streams tokens). Each piece but the last keeps
    one trailing space, so that the pieces join back into the transcript as the server reads them."""
    text = " ".join(transcript.split())
    if how == "word":
        parts = text.split(" ")
    elif how == "sentence":
        parts = [part for part in _SENTENCE_END.split(text) if part]
    else:
        raise ValueError(f"unknown split {how!r}: use {' or '.join(SPLITS)}")
    return [part + " " for part in parts[:-1]] + parts[-1:]


@dataclass(frozen=True)
class AgentTraffic:
    """How an agent sends a turn: pieces (`sentence` or `word`) every `interval_s`, the buffer delay it
    asks for (agents ask for 0: Cartesia's default, 3000 ms, would hold text back), word timestamps."""

    split: str = "sentence"
    interval_s: float = 0.1
    max_buffer_delay_ms: int | None = 0
    timestamps: bool = True
    idle_reconnect_s: float = 300.0

    def describe(self) -> dict[str, Any]:
        return {
            "workload": "agent",
            "split": self.split,
            "piece_interval_ms": round(self.interval_s * 1000, 3),
            "max_buffer_delay_ms": self.max_buffer_delay_ms,
            "timestamps": self.timestamps,
            "idle_reconnect_s": self.idle_reconnect_s,
        }


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
