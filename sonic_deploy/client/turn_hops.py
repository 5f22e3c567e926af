"""What the turn's other hops look like to the code that times them: speech to text, and the language model.

Each service has its own client module (`ink`, `transcribe` for speech to text; `openai_chat`, `bedrock` for
the language model); the turn probe (`sonic-deploy probe turn`) and an agent drive them through these two
shapes, so a call's code does not know which service it talks to. Every stamp is `time.perf_counter()`,
the clock the TTS clients stamp audio with (`client/http.py`), taken when the bytes came off the socket or,
where a library reads them, when they were read. Errors are the one family of `client/errors.py`, each with
the `kind` the probe counts it under.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, MutableMapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Literal, Protocol, Self

Trace = MutableMapping[str, float]


@dataclass(frozen=True)
class Transcript:
    """One transcript event of a caller's turn: a partial (the turn's text so far, which may still
    change) or the final one (the whole turn, after the service decided the caller had finished)."""

    at: float
    text: str
    final: bool


class SpeechSession(Protocol):
    """One call's live connection to a speech-to-text service: the caller's audio in at real-time pace,
    transcripts out, any number of turns on the one connection."""

    async def send(self, audio: bytes) -> None:
        """The next piece of the caller's audio, in the encoding and rate the session was opened with."""
        ...

    async def receive(self) -> Transcript:
        """The next transcript event; a `SonicError` if the service reports an error or the connection
        ends. It waits as long as it takes: the caller bounds it."""
        ...

    async def close(self) -> None: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None: ...


class SpeechToText(Protocol):
    """A speech-to-text service, and how to open a session on it for one call."""

    name: str

    async def session(self, *, encoding: str, sample_rate: int) -> SpeechSession:
        """A connected session for audio of `encoding` (`pcm_s16le`, `pcm_mulaw`) at `sample_rate`."""
        ...


@dataclass(frozen=True)
class Message:
    role: Literal["user", "assistant"]
    content: str


@dataclass(frozen=True)
class Token:
    """One piece of the model's reply as it streamed in."""

    at: float
    text: str


class LanguageModel(Protocol):
    """A streaming chat model: the conversation so far in, the reply out piece by piece."""

    name: str

    def stream(
        self, messages: Sequence[Message], *, system: str | None = None, trace: Trace | None = None
    ) -> AsyncIterator[Token]:
        """The reply to `messages`, as it streams; a `SonicError` if the request fails or the stream
        breaks. Closing the iterator early ends the request. `trace` gets `sent_at`, when the request was
        written, and `connect_s` for a new connection (`client/http.py`)."""
        ...

    async def close(self) -> None: ...
