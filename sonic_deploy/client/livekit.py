"""Sonic on a SageMaker endpoint as a LiveKit Agents TTS (`pip install 'sonic-deploy[livekit]'`).

    from sonic_deploy.client.livekit import SonicSageMakerTTS

    session = AgentSession(tts=SonicSageMakerTTS(endpoint_name="sonic-prod", region="us-east-2", voice=VOICE_ID))

A thin translation between LiveKit's TTS classes and `SageMakerClient`, which does all of the protocol
(SigV4, event-stream, HTTP). The Marketplace container takes one request per utterance, with no
continuations, so `stream()` cuts the text into sentences with LiveKit's own sentence tokenizer and sends
one request per sentence, in order, each one's audio pushed as it arrives: the design of LiveKit's
`tts.StreamAdapter` (livekit/agents/tts/stream_adapter.py:130-200), as a streaming TTS of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
import weakref
from collections.abc import AsyncGenerator
from typing import Any, Never, cast

import botocore.session
from livekit.agents import (
    AgentSession,
    APIConnectionError,
    APIConnectOptions,
    APIError,
    APIStatusError,
    APITimeoutError,
    ConversationItemAddedEvent,
    tokenize,
    tts,
    utils,
)
from livekit.agents.llm import ChatMessage
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, TimedString

from sonic_deploy.client.metric_names import LLM_FIRST_TOKEN, STT_FINAL, TTS_FIRST_BYTE
from sonic_deploy.client.sagemaker import (
    EndpointUnreachableError,
    InvalidRequestError,
    RequestTimeoutError,
    SageMakerClient,
    SageMakerError,
    StreamError,
    ThrottledError,
    request_body,
)
from sonic_deploy.client.telemetry import Telemetry

__all__ = ["SonicSageMakerTTS", "report_turn_hops"]

logger = logging.getLogger(__name__)


# A caller notices a second of silence; LiveKit's own spacing would cost 4.1 s (types.py:156-164).
DEFAULT_RETRY_SILENCE_S = 1.0
MAX_RETRY_SILENCE_S = 30.0


class SonicSageMakerTTS(tts.TTS[Never]):  # no events beyond the base's
    """A LiveKit TTS for Sonic on a SageMaker endpoint: `synthesize(text)` is one request, `stream()` one
    request per sentence.

    Pass `endpoint_name` (the stack output EndpointName) with `region`, `endpoint_url` (a VPC endpoint, or
    `sonic-deploy probe serve`) and `session` (a botocore session, for a profile) as for
    `SageMakerClient`; or `client=` to share one client and its pool between agents, which this TTS then
    leaves open. `tokenizer` cuts a stream's text into sentences (default: LiveKit's blingfire sentence
    tokenizer, as its Cartesia plugin's: livekit/plugins/cartesia/tts.py:183-185). `conn_options.timeout`
    bounds each request's wait for a connection and each wait for its next bytes; `max_retry` applies to
    each sentence alone. `max_retry_silence_s` bounds the silence a refused sentence's retries may cost in
    `stream()`: LiveKit's default spacing (0.1 s, then 2 s each) would hold a caller 4 s; past the bound the
    error is raised (docs/connect.md, "Retries").
    """

    def __init__(
        self,
        *,
        endpoint_name: str | None = None,
        region: str | None = None,
        voice: str,
        sample_rate: int = 24000,
        encoding: str = "pcm_s16le",
        language: str | None = "en",
        endpoint_url: str | None = None,
        session: botocore.session.Session | None = None,
        client: SageMakerClient | None = None,
        telemetry: Telemetry | None = None,
        tokenizer: tokenize.SentenceTokenizer | None = None,
        max_retry_silence_s: float = DEFAULT_RETRY_SILENCE_S,
    ) -> None:
        number = isinstance(max_retry_silence_s, int | float) and not isinstance(max_retry_silence_s, bool)
        if not number or not 0 <= max_retry_silence_s <= MAX_RETRY_SILENCE_S:
            raise ValueError(
                f"max_retry_silence_s={max_retry_silence_s!r}: not 0 to {MAX_RETRY_SILENCE_S:g} seconds. "
                f"Fix: the longest a caller may wait while a refused sentence is sent again "
                f"(default {DEFAULT_RETRY_SILENCE_S:g}; 0: never retried)"
            )
        self.max_retry_silence_s = max_retry_silence_s
        if encoding != "pcm_s16le":
            raise ValueError(
                f"encoding {encoding!r}: LiveKit's AudioEmitter takes 16-bit PCM (audio/pcm). "
                "Fix: encoding='pcm_s16le' (LiveKit encodes for the room itself)"
            )
        # The client core's own checks of the voice and the output format, before anything is sent.
        request_body("check", voice=voice, sample_rate=sample_rate, encoding=encoding, language=language)
        super().__init__(
            # Sentence-level timings, as LiveKit's StreamAdapter gives (stream_adapter.py:34, 170-172).
            capabilities=tts.TTSCapabilities(streaming=True, aligned_transcript=True),
            sample_rate=sample_rate,
            num_channels=1,
        )
        if client is None:
            if not endpoint_name:
                raise ValueError("no endpoint_name. Fix: the stack output EndpointName, or client=")
            client = SageMakerClient(
                endpoint_name, region=region, endpoint_url=endpoint_url, session=session, telemetry=telemetry
            )
            self._owns_client = True
        elif (
            (endpoint_name not in (None, client.endpoint_name))
            or region
            or endpoint_url
            or session
            or telemetry
        ):
            raise ValueError(
                "client= already names the endpoint and its credentials. Fix: pass endpoint_name, "
                "region, endpoint_url, session and telemetry to the SageMakerClient, not here"
            )
        else:
            self._owns_client = False
        self._client = client
        self._voice, self._language = voice, language
        self._tokenizer = tokenizer or tokenize.blingfire.SentenceTokenizer()
        self._streams: weakref.WeakSet[_Utterance | _SentenceStream] = weakref.WeakSet()

    @property
    def model(self) -> str:
        return self._client.endpoint_name

    @property
    def provider(self) -> str:
        return "Cartesia (SageMaker)"

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.ChunkedStream:
        stream = _Utterance(tts=self, input_text=text, conn_options=conn_options)
        self._streams.add(stream)
        return stream

    def stream(
        self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> tts.SynthesizeStream:
        stream = _SentenceStream(tts=self, conn_options=conn_options)
        self._streams.add(stream)
        return stream

    async def aclose(self) -> None:
        """Close every stream still open (their HTTP streams with them), then the client if this TTS made it."""
        for stream in list(self._streams):
            await stream.aclose()
        if self._owns_client:
            await self._client.close()

    async def _audio(self, text: str, *, context_id: str, timeout: float) -> AsyncGenerator[bytes]:
        """One request's audio as it arrives, with the client's typed errors as LiveKit's. A cancel
        (LiveKit's `aclose()`) reaches the client inside `aclosing`, which closes the HTTP stream: no
        more of this request's audio is read, let alone pushed."""
        # LiveKit leaves conn_options.timeout to the plugin (types.py:141-144, tts.py:410-419): the
        # request's own bound on each wait for bytes, not a second timer around every chunk.
        chunks = self._client.speak(
            text,
            voice=self._voice,
            sample_rate=self.sample_rate,
            language=self._language,
            context_id=context_id,
            wait_timeout_s=timeout or None,
        )
        try:
            async with contextlib.aclosing(chunks):
                async for chunk in chunks:
                    yield chunk.data
        except SageMakerError as error:
            raise _api_error(error, context_id) from error


def _api_error(error: SageMakerError, context_id: str) -> APIError:
    """LiveKit's error for the client's, as its retry loop and AgentSession read it (`retryable`,
    `status_code`)."""
    message = str(error)
    if isinstance(error, ThrottledError):
        return APIStatusError(message, status_code=429, request_id=context_id, retryable=True)
    if isinstance(error, InvalidRequestError):
        return APIStatusError(
            message, status_code=error.status or 422, request_id=context_id, retryable=False
        )
    if isinstance(error, RequestTimeoutError):
        return APITimeoutError(message)
    if isinstance(error, EndpointUnreachableError | StreamError):
        return APIConnectionError(message)
    if error.status is not None:  # the model's 5xx
        return APIStatusError(
            message, status_code=error.status, request_id=context_id, retryable=error.retryable
        )
    return APIError(message, retryable=error.retryable)  # no credentials, access denied, an unknown code


def _final(error: APIError) -> APIError:
    """The same error, not to be retried."""
    if isinstance(error, APIStatusError):
        return APIStatusError(
            error.message, status_code=error.status_code, request_id=error.request_id, retryable=False
        )
    if isinstance(error, APITimeoutError):
        return APITimeoutError(error.message, retryable=False)
    if isinstance(error, APIConnectionError):
        return APIConnectionError(error.message, retryable=False)
    return APIError(error.message, retryable=False)


class _Utterance(tts.ChunkedStream):
    """`synthesize(text)`: one request. LiveKit's own loop retries it (tts.py:410-459)."""

    _tts: SonicSageMakerTTS

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        context_id = utils.shortuuid()
        output_emitter.initialize(
            request_id=context_id, sample_rate=self._tts.sample_rate, num_channels=1, mime_type="audio/pcm"
        )
        if self._input_text.strip():  # nothing to say is no request, and no error (tts.py:421)
            audio = self._tts._audio(
                self._input_text, context_id=context_id, timeout=self._conn_options.timeout
            )
            pushed = False
            try:
                async with contextlib.aclosing(audio):
                    async for data in audio:
                        output_emitter.push(data)
                        pushed = True
            except APIError as error:
                # LiveKit's loop would send the whole text again (tts.py:410-459), and part of it was
                # heard: once any audio is out, the error is final.
                if pushed:
                    raise _final(error) from error
                raise
        output_emitter.flush()


class _SentenceStream(tts.SynthesizeStream):
    """`stream()`: one segment, one request per sentence, in order."""

    _tts: SonicSageMakerTTS

    def __init__(self, *, tts: SonicSageMakerTTS, conn_options: APIConnectOptions) -> None:
        # A failed request is retried here, per sentence, and never by LiveKit's loop. That loop retries a
        # stream only while no audio has been pushed, and then replays all of its input (tts.py:641-647,
        # 673-678): a 429 on the second sentence would end the turn with the rest unspoken. A sentence is a
        # request of its own, though, so sending it again repeats nothing the caller heard: as LiveKit's
        # StreamAdapter retries each sentence's synthesize() (stream_adapter.py:184-190) and runs its own
        # loop at max_retry=0 (stream_adapter.py:20-22, 117). A sentence whose audio had started is not sent
        # again (part of it was heard), as LiveKit's loop would not. Once a sentence's retries are spent,
        # its error ends the stream: LiveKit emits it (recoverable=False) and raises it to the consumer
        # (tts.py:649-660, 824-830).
        super().__init__(tts=tts, conn_options=dataclasses.replace(conn_options, max_retry=0))
        self._retries = conn_options

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        request_id = utils.shortuuid()
        output_emitter.initialize(
            request_id=request_id,
            sample_rate=self._tts.sample_rate,
            num_channels=1,
            mime_type="audio/pcm",
            stream=True,
        )
        output_emitter.start_segment(segment_id=request_id)
        sentences = self._tts._tokenizer.stream()

        async def forward_input() -> None:
            async for data in self._input_ch:
                if isinstance(data, self._FlushSentinel):
                    sentences.flush()
                else:
                    sentences.push_text(data)
            sentences.end_input()

        async def speak_sentences() -> None:
            spoken_s, index = 0.0, 0
            async for sentence in sentences:
                # Where each sentence starts in the audio, as StreamAdapter marks it (stream_adapter.py:170).
                output_emitter.push_timed_transcript(TimedString(text=sentence.token, start_time=spoken_s))
                if text := sentence.token.strip():
                    self._mark_started()
                    index += 1
                    pushed = await self._speak_sentence(text, output_emitter, f"{request_id}-{index}")
                    spoken_s += pushed / (2 * self._tts.sample_rate)
                    output_emitter.flush()  # the sentence's last audio goes out now, not with the next one

        tasks = [asyncio.create_task(forward_input()), asyncio.create_task(speak_sentences())]
        try:
            await asyncio.gather(*tasks)
        finally:
            await sentences.aclose()
            await utils.aio.cancel_and_wait(*tasks)

    async def _speak_sentence(self, text: str, emitter: tts.AudioEmitter, context_id: str) -> int:
        """The sentence's audio pushed into `emitter`, retried while none of it was and the silence so far
        stays within `max_retry_silence_s` (each wait shortened to what is left of it); the bytes pushed."""
        options, attempt = self._retries, 0
        deadline = time.monotonic() + self._tts.max_retry_silence_s
        while True:
            pushed = 0
            audio = self._tts._audio(text, context_id=f"{context_id}.{attempt}", timeout=options.timeout)
            try:
                async with contextlib.aclosing(audio):
                    async for data in audio:
                        emitter.push(data)
                        pushed += len(data)
                return pushed
            except APIError as error:
                left = deadline - time.monotonic()
                if pushed or not error.retryable or attempt >= options.max_retry or left <= 0:
                    raise
                event = tts.TTSError(
                    timestamp=time.time(), label=self._tts.label, error=error, recoverable=True
                )
                self._tts.emit("error", event)
                interval = min(options._interval_for_retry(attempt), left)  # LiveKit's spacing, bounded
                logger.warning("a sentence failed before its audio: %s; sent again in %s s", error, interval)
                await asyncio.sleep(interval)
                attempt += 1


# LiveKit's per-turn latencies, on each message of the conversation (llm/chat_context.py:286-340): the user
# message's transcription delay, the assistant message's first token and first audio, in seconds.
_HOPS = (
    ("transcription_delay", STT_FINAL),
    ("llm_node_ttft", LLM_FIRST_TOKEN),
    ("tts_node_ttfb", TTS_FIRST_BYTE),
)


def report_turn_hops(session: AgentSession[Any], telemetry: Telemetry) -> None:
    """Writes each turn's hops as LiveKit measured them as `telemetry`'s hop lines, one a message (its
    per-message metrics: `metrics_collected` is deprecated, voice/agent_session.py:770-777)."""

    def added(event: ConversationItemAddedEvent) -> None:
        if isinstance(event.item, ChatMessage):
            measured = cast(dict[str, float], event.item.metrics)
            telemetry.hops(
                {hop: measured[key] * 1000 for key, hop in _HOPS if key in measured}, framework="livekit"
            )

    session.on("conversation_item_added", added)
