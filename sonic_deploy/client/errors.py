"""The errors of both routes, typed so that a caller can branch on what to do: wait and retry (over
capacity), fix the request (refused), fix the set-up (credentials, network), or accept a partial utterance
(the stream broke). Each carries the `kind` the probe counts it under, so a measurement and an agent's
logs name a failure alike."""

from __future__ import annotations

from dataclasses import dataclass

# Codes of a request that AWS refused for who sent it, not for what it said.
_ACCESS_CODES = frozenset(
    {
        "AccessDeniedException",
        "UnrecognizedClientException",
        "InvalidSignatureException",
        "ExpiredTokenException",
        "IncompleteSignature",
        "MissingAuthenticationToken",
        "MissingAuthenticationTokenException",
        "InvalidClientTokenId",
    }
)
# Codes (each as kind `client_error_CODE`) of SageMaker, Bedrock and Amazon Transcribe: over capacity
# (Transcribe's LimitExceededException is its 429), a refused request (BadRequestException is its 400), and
# a service that could not answer now and may later, so the same request may be sent again.
_THROTTLED_CODES = frozenset({"ThrottlingException", "LimitExceededException"})
_INVALID_CODES = frozenset({"ValidationError", "ValidationException", "BadRequestException"})
_RETRYABLE_CODES = frozenset(
    {
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "InternalServerException",
        "InternalFailureException",
        "ModelNotReadyException",
        "ModelTimeoutException",
    }
)
_STREAM_KINDS = frozenset(
    {
        "cut",
        "malformed",
        "unattributed",
        "no_audio",
        "model_stream_error",
        "internal_stream_failure",
        "closed",
    }
)


class SonicError(Exception):
    """A request that did not give a whole utterance. `kind` names it as the probe counts it
    (`model_error_429`, `model_stream_error`, `client_error_ValidationError`, `timeout`...); `status` is the
    model's own status code where there is one (429 for any ThrottledError); `retryable` says whether the same request may work later."""

    retryable = False

    def __init__(self, kind: str, message: str, status: int | None = None) -> None:
        super().__init__(f"{kind}: {message}" if message else kind)
        self.kind, self.message, self.status = kind, message, status


class ThrottledError(SonicError):
    """No free capacity: the model answered 429 (more concurrent streams than the instances take), a
    socket closed with 1013 ("try again later"), or SageMaker throttled the caller (its
    ThrottlingException, an HTTP 400). `status` is 429 in every case. Retry after a pause, or add capacity."""

    retryable = True


class InvalidRequestError(SonicError):
    """The request itself is refused (the model's 422, SageMaker's ValidationError, Bedrock's
    ValidationException): do not retry it."""


class AccessError(SonicError):
    """No usable credentials, or they may not call this endpoint: on SageMaker the IAM action is
    sagemaker:InvokeEndpointWithResponseStream on the endpoint's ARN; on the WebSocket API, the API key."""


class EndpointUnreachableError(SonicError):
    """No connection to the endpoint (DNS, routing, a security group, a VPC endpoint's policy), or, with
    kind `tls` and not retryable, a certificate the client does not trust."""

    retryable = True


class StreamError(SonicError):
    """The stream broke after it started (ModelStreamError, InternalStreamFailure, a cut connection or a
    closed socket, bytes that are not the protocol): part of the utterance may have been delivered."""

    retryable = True


class RequestTimeoutError(SonicError):
    """No connection, or no bytes, within the client's timeouts."""

    retryable = True


def error_for(kind: str, message: str, status: int | None = None) -> SonicError:
    """The typed error for a kind of failure."""
    cls: type[SonicError] = SonicError
    if (
        kind.endswith("_429")
        or kind == "closed_1013"
        or kind.removeprefix("client_error_") in _THROTTLED_CODES
    ):
        cls = ThrottledError
    elif kind.endswith("_422") or kind.removeprefix("client_error_") in _INVALID_CODES:
        cls = InvalidRequestError
    elif kind == "credentials" or kind.removeprefix("client_error_") in _ACCESS_CODES:
        cls = AccessError
    elif kind in ("refused", "connect", "tls"):
        cls = EndpointUnreachableError
    elif kind in _STREAM_KINDS or kind.startswith("closed_"):
        cls = StreamError
    elif kind == "timeout":
        cls = RequestTimeoutError
    if cls is ThrottledError and status is None:
        status = 429  # what it means, whoever said it: frameworks that read `.status` then back off
    error = cls(kind, message, status)
    if cls is SonicError and (
        kind.endswith("_5xx") or kind.removeprefix("client_error_") in _RETRYABLE_CODES
    ):
        error.retryable = True
    if kind == "tls":  # an untrusted certificate stays untrusted: fix the trust store, not the network
        error.retryable = False
    return error


@dataclass(frozen=True, slots=True)
class AudioChunk:
    """Audio as it arrived: `data` in the requested encoding and rate; `at` is `time.perf_counter()` when
    its bytes came off the socket (not when the caller's task got round to it)."""

    data: bytes
    at: float
