"""Error responses as botocore parses them, each to the typed error a caller branches on."""

from __future__ import annotations

import json

import pytest

from sonic_deploy.client import (
    AccessError,
    InvalidRequestError,
    SageMakerClient,
    SonicError,
    ThrottledError,
)

MODEL_ERROR = {"x-amzn-ErrorType": "ModelError:http://internal/", "Content-Type": "application/json"}


def _model_error(status: int) -> bytes:
    return json.dumps({"OriginalStatusCode": status, "OriginalMessage": "m", "message": "m"}).encode()


@pytest.mark.parametrize(
    ("status", "headers", "body", "cls", "code", "retryable"),
    [
        (424, MODEL_ERROR, _model_error(429), ThrottledError, 429, True),
        (424, MODEL_ERROR, _model_error(422), InvalidRequestError, 422, False),
        (424, MODEL_ERROR, _model_error(500), SonicError, 500, True),
        (400, {"x-amzn-ErrorType": "ThrottlingException"}, b'{"message": "slow"}', ThrottledError, 429, True),
        (
            400,
            {"x-amzn-ErrorType": "ValidationError"},
            b'{"message": "bad"}',
            InvalidRequestError,
            None,
            False,
        ),
        (403, {"x-amzn-ErrorType": "AccessDeniedException"}, b'{"message": "no"}', AccessError, None, False),
        (500, {"x-amzn-ErrorType": "InternalFailure"}, b'{"message": "oops"}', SonicError, None, True),
        (502, {"Content-Type": "text/html"}, b"<html>Bad Gateway</html>", SonicError, None, True),
    ],
)
def test_an_error_response_is_the_error_a_caller_branches_on(
    status: int,
    headers: dict[str, str],
    body: bytes,
    cls: type[SonicError],
    code: int | None,
    retryable: bool,
) -> None:
    error = SageMakerClient("e", region="us-east-2").error_response(status, headers.items(), body)
    assert (type(error), error.status, error.retryable) == (cls, code, retryable)
