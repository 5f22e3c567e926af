"""Sonic on a SageMaker endpoint as a pipecat TTS service (`pip install 'sonic-deploy[pipecat]'`).

    tts = SonicSageMakerTTSService(endpoint_name="sonic-prod", region="us-east-2", voice_id=VOICE_ID)
    pipeline = Pipeline([transport.input(), stt, user_aggregator, llm, tts, transport.output(), ...])

A thin translation between pipecat's frames and `SageMakerClient.speak`: pipecat aggregates the LLM's text
into sentences and calls `run_tts` once per sentence, which is one request (the Marketplace container takes
no continuations); the audio comes back as `TTSAudioRawFrame`s at the pipeline's rate (or `sample_rate=`).
An interruption cancels the task that runs `run_tts`, which closes the request's HTTP stream; pipecat
drops the audio already queued. Failures are `ErrorFrame`s with a pipecat `ErrorCategory` per typed
error. Every request, signature and byte of protocol is the client core's (`sonic_deploy.client`).

pipecat 1.14 source facts this relies on are cited as file:line under site-packages/pipecat/.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import Any

import botocore.session
from pipecat.frames.frames import (
    CancelFrame,
    EndFrame,
    ErrorFrame,
    Frame,
    MetricsFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
)
from pipecat.metrics.metrics import TTFBMetricsData
from pipecat.observers.base_observer import BaseObserver, FramePushed
from pipecat.services.cartesia.tts import language_to_cartesia_language
from pipecat.services.llm_service import LLMService
from pipecat.services.settings import TTSSettings
from pipecat.services.stt_service import STTService
from pipecat.services.tts_service import TTSService
from pipecat.transcriptions.language import Language
from pipecat.utils.errors import ErrorCategory

from sonic_deploy.client.metric_names import LLM_FIRST_TOKEN, STT_FINAL, TTS_FIRST_BYTE
from sonic_deploy.client.sagemaker import (
    AccessError,
    EndpointUnreachableError,
    InvalidRequestError,
    RequestTimeoutError,
    SageMakerClient,
    SageMakerError,
    StreamError,
    ThrottledError,
)
from sonic_deploy.client.telemetry import Telemetry

# How pipecat should treat each typed error, set on the ErrorFrame itself: a permanent category (the two
# auth ones, INVALID_REQUEST) writes the service off for the call (utils/errors.py:66-72,
# frame_processor.py:1007-1008). The model's 422 refuses one sentence: APPLICATION ("content a provider
# rejected"), so the next is spoken (docs/connect.md, "Errors"); SageMaker's ValidationError (no such
# endpoint) stays permanent. A throttle is RATE_LIMIT; unset, SageMaker's ThrottlingException would be UNKNOWN.
_CATEGORIES: tuple[tuple[type[Exception], ErrorCategory], ...] = (
    (ThrottledError, ErrorCategory.RATE_LIMIT),
    (InvalidRequestError, ErrorCategory.INVALID_REQUEST),
    (ValueError, ErrorCategory.INVALID_REQUEST),  # a voice, rate or encoding the client refuses to send
    (EndpointUnreachableError, ErrorCategory.CONNECTIVITY),
    (RequestTimeoutError, ErrorCategory.CONNECTIVITY),
    (StreamError, ErrorCategory.SERVER),
)


def error_category(error: Exception) -> ErrorCategory:
    """pipecat's category for a failed request."""
    if isinstance(error, AccessError):
        denied = error.kind.endswith("AccessDeniedException")
        return ErrorCategory.AUTHORIZATION if denied else ErrorCategory.AUTHENTICATION
    if isinstance(error, InvalidRequestError) and error.kind.endswith("_422"):
        return ErrorCategory.APPLICATION
    for kind, category in _CATEGORIES:
        if isinstance(error, kind):
            return category
    if isinstance(error, SageMakerError) and error.retryable:  # the model's 5xx, ServiceUnavailable
        return ErrorCategory.SERVER
    return ErrorCategory.UNKNOWN


def _message(error: Exception) -> str:
    if isinstance(error, SageMakerError):
        # Not "kind: message": pipecat masks a value after "credentials:" as a secret
        # (utils/security/redaction.py:33-72), which would hide "no AWS credentials found. Fix: ...".
        return f"Sonic on SageMaker failed ({error.kind}): {error.message}"
    return f"Sonic on SageMaker: {error}"


class SonicSageMakerTTSService(TTSService):
    """pipecat TTS for Sonic on a SageMaker endpoint (the Marketplace model package).

    `endpoint_name`, `region`, `endpoint_url` and `session` (a botocore session; default boto3's
    credential chain) make a `SageMakerClient` that this service owns and closes. Or pass `client=` to
    share one client, and its pool of connections, between the services of many calls; then the
    caller closes it. `voice_id` and `language` are runtime settings (`TTSUpdateSettingsFrame`);
    `encoding` must be pcm_s16le, what pipecat's audio frames carry. Other keyword arguments go to
    pipecat's `TTSService`.
    """

    Settings = TTSSettings

    def __init__(
        self,
        *,
        endpoint_name: str | None = None,
        region: str | None = None,
        voice_id: str,
        sample_rate: int | None = None,
        encoding: str = "pcm_s16le",
        language: Language | str | None = "en",
        endpoint_url: str | None = None,
        session: botocore.session.Session | None = None,
        client: SageMakerClient | None = None,
        telemetry: Telemetry | None = None,
        settings: TTSSettings | None = None,
        **kwargs: Any,
    ) -> None:
        if encoding != "pcm_s16le":
            raise ValueError(
                f"encoding {encoding!r}: pipecat's audio frames are 16-bit PCM. Fix: leave it pcm_s16le; "
                "a transport that sends mu-law (a phone line) converts the frames itself"
            )
        if client is None:
            if not endpoint_name:
                raise ValueError(
                    "no endpoint. Fix: endpoint_name= (the stack output EndpointName), or client= a shared "
                    "SageMakerClient"
                )
            client = SageMakerClient(
                endpoint_name, region=region, endpoint_url=endpoint_url, session=session, telemetry=telemetry
            )
            self._owns_client = True
        elif endpoint_name not in (None, client.endpoint_name) or (
            region,
            endpoint_url,
            session,
            telemetry,
        ) != (
            None,
            None,
            None,
            None,
        ):
            raise ValueError(
                "client= already names its endpoint, Region and credentials. Fix: pass either client= "
                "or endpoint_name= (with region=, endpoint_url=, session=, telemetry=), not both"
            )
        else:
            self._owns_client = False
        self._client = client
        # The endpoint is the model: there is no model id to send, so none to change.
        store = self.Settings(model=None, voice=voice_id, language=language)
        if settings is not None:
            store.apply_update(settings)
        super().__init__(
            sample_rate=sample_rate,
            # The base opens each turn's audio context with a TTSStartedFrame, starts TTFB
            # (services/tts_service.py:1626-1635) and closes the turn with a TTSStoppedFrame
            # (l.811-826), as for pipecat's own HTTP services (cartesia/tts.py:988-991).
            push_start_frame=True,
            push_stop_frames=True,
            # A context that ends with no audio is counted, and the third in a row writes the service off
            # for good (services/tts_service.py:1979-2028; default 3, l.175). Every failed request here
            # is already reported with its category, and the permanent ones (access, a voice the client
            # refuses) already disable the service: counting the same failures again as silence would
            # only add the transient ones, so that three throttled sentences in a row (a busy minute)
            # would mute the agent for the rest of the call. 0 still reports each silent context.
            max_consecutive_zero_audio_contexts=kwargs.pop("max_consecutive_zero_audio_contexts", 0),
            settings=store,
            **kwargs,
        )
        # The context of the last sentence sent, while it has yielded no audio (see on_turn_context_completed).
        self._silent_context: str | None = None
        # Sentences whose failure was reported with its ErrorFrame (see _record_context_audio_outcome).
        self._failed_contexts: set[str] = set()

    def can_generate_metrics(self) -> bool:
        return True

    def language_to_service_language(self, language: Language) -> str | None:
        # The same model as Cartesia's API, so the same language codes.
        return language_to_cartesia_language(language)

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None]:
        """One sentence, one request. Never catches CancelledError: an interruption cancels this task
        (processors/frame_processor.py:1170-1171), the cancellation goes up through `speak`, and its
        `finally` closes the HTTP stream. `aclosing` does the same should the task stop at a `yield`."""
        self._silent_context = context_id
        voice, language = self._settings.voice, self._settings.language
        stream = self._client.speak(
            text,
            voice=voice if isinstance(voice, str) else "",  # "" is refused, naming the voice
            sample_rate=self.sample_rate,
            language=str(language) if language else None,
        )
        try:
            async with contextlib.aclosing(stream):
                async for chunk in stream:
                    if self._silent_context is not None:
                        self._silent_context = None
                        # TTFB to the endpoint's first audio, not to its playback (the base's stop,
                        # services/tts_service.py:1936-1939, comes later; the first stop wins,
                        # processors/metrics/frame_processor_metrics.py:137-158).
                        await self.stop_ttfb_metrics()
                    yield TTSAudioRawFrame(chunk.data, self.sample_rate, 1, context_id=context_id)
        except (SageMakerError, ValueError) as error:
            # Yielded, not raised: an exception out of run_tts skips the rest of the sentence's handling
            # (processors/frame_processor.py:1299-1319). The frame goes upstream in order with the audio.
            self._failed_contexts.add(context_id)
            yield ErrorFrame(error=_message(error), exception=error, category=error_category(error))
            return
        await self.start_tts_usage_metrics(text)

    async def _record_context_audio_outcome(self, context_id: str, received_audio: bool) -> None:
        """pipecat reports each context that ends silent as an error of its own (services/tts_service.py:
        1979-2029), for a provider that fails without saying so; a sentence that failed here has had its
        typed ErrorFrame, so one failure is one error, not two."""
        failed = context_id in self._failed_contexts
        self._failed_contexts.discard(context_id)
        if failed and not received_audio:
            return
        await super()._record_context_audio_outcome(context_id, received_audio)

    async def on_turn_context_completed(self) -> None:
        # pipecat closes an HTTP service's turn only if the turn's last sentence yielded audio
        # (services/tts_service.py:815-826); otherwise the context waits stop_frame_timeout_s (3 s) for
        # audio that will never come (l.1910-1918), and every frame behind it waits too: the next
        # sentence after a throttle would be 3 s late. Close it here as the base would have.
        context_id, self._silent_context = self._silent_context, None
        if context_id is not None and self.audio_context_available(context_id):
            await self.append_to_audio_context(context_id, TTSStoppedFrame(context_id=context_id))
            await self.remove_audio_context(context_id)
        await super().on_turn_context_completed()  # type: ignore[no-untyped-call]

    async def stop(self, frame: EndFrame) -> None:
        await super().stop(frame)
        await self._close_client()

    async def cancel(self, frame: CancelFrame) -> None:
        await super().cancel(frame)
        await self._close_client()

    async def cleanup(self) -> None:
        await super().cleanup()  # type: ignore[no-untyped-call]
        await self._close_client()

    async def _close_client(self) -> None:
        if self._owns_client:
            await self._client.close()


# Which hop a service's TTFB metric is: STT services time it from the end of speech to the final
# transcript (services/stt_service.py:644-667), LLM services to the first token (openai/base_llm.py:558-601),
# TTS services to the first audio (tts_service.py:1631-1938).
_HOP_OF: tuple[tuple[type[Any], str], ...] = (
    (STTService, STT_FINAL),
    (LLMService, LLM_FIRST_TOKEN),
    (TTSService, TTS_FIRST_BYTE),
)


class TelemetryObserver(BaseObserver):
    """The turn's hops as pipecat measures them, as `telemetry`'s hop lines: each TTFB metric a service
    reports, by the kind of service. Needs `PipelineParams(enable_metrics=True)`; add it with
    `PipelineWorker(..., observers=[TelemetryObserver(telemetry)])` (docs/client.md, "Telemetry")."""

    def __init__(self, telemetry: Telemetry) -> None:
        # Each frame once, from the service that measured it (observers/base_observer.py:122-143).
        super().__init__(observe_every_push=False)
        self._telemetry = telemetry

    async def on_push_frame(self, data: FramePushed) -> None:
        if not isinstance(data.frame, MetricsFrame):
            return
        hop = next((name for kind, name in _HOP_OF if isinstance(data.source, kind)), None)
        for metric in data.frame.data:
            if hop is not None and isinstance(metric, TTFBMetricsData):
                self._telemetry.hops({hop: metric.value * 1000}, framework="pipecat")
