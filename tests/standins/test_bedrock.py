"""The Bedrock stand-in of `probe serve` (POST /model/{modelId}/converse-stream and /converse) read by the
real boto3 client: every event parses, the text is the reply, and a bad request is boto3's
ValidationException with the stand-in's message."""

from __future__ import annotations

import time
import urllib.request
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from sonic_deploy.standins.llm import REPLY, reply_tokens

from .harness import ReferenceServer, ServerFactory

FIRST_TOKEN_MS, TOKENS_PER_S = 150.0, 200.0
MODEL = "us.anthropic.claude-3-5-haiku-20241022-v1:0"
MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": [{"text": "A table for two, please."}]},
    {"role": "assistant", "content": [{"text": "For what time?"}]},
    {"role": "user", "content": [{"text": "Eight tonight."}]},
]


def _server(factory: ServerFactory) -> ReferenceServer:
    return factory("--llm-first-token-ms", str(FIRST_TOKEN_MS), "--llm-tokens-per-s", str(TOKENS_PER_S))


def _boto3(server: ReferenceServer) -> Any:
    return boto3.client(
        "bedrock-runtime",
        endpoint_url=server.base,
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key="y",
    )


def test_boto3_reads_every_event_of_the_stream_and_the_text_is_the_reply(
    reference_server: ServerFactory,
) -> None:
    client = _boto3(_server(reference_server))
    began = time.perf_counter()
    response = client.converse_stream(
        modelId=MODEL,
        messages=MESSAGES,
        system=[{"text": "You book tables."}],
        inferenceConfig={"maxTokens": 200, "temperature": 0.2},
    )
    events = list(response["stream"])
    kinds = [next(iter(event)) for event in events]
    deltas = ["contentBlockDelta"] * len(reply_tokens())
    assert kinds == ["messageStart", *deltas, "contentBlockStop", "messageStop", "metadata"]
    assert events[0]["messageStart"] == {"role": "assistant"}
    texts = [event["contentBlockDelta"]["delta"]["text"] for event in events[1:-3]]
    assert texts == reply_tokens() and "".join(texts) == REPLY
    assert events[-2]["messageStop"]["stopReason"] == "end_turn"
    metadata = events[-1]["metadata"]
    assert metadata["usage"]["outputTokens"] == len(texts)
    assert metadata["usage"]["totalTokens"] == metadata["usage"]["inputTokens"] + len(texts)
    assert isinstance(metadata["metrics"]["latencyMs"], int)
    # Never before its schedule (a busy machine makes it later only).
    assert time.perf_counter() - began >= FIRST_TOKEN_MS / 1000 + (len(texts) - 1) / TOKENS_PER_S


def test_boto3_reads_a_whole_converse_reply(reference_server: ServerFactory) -> None:
    answer = _boto3(_server(reference_server)).converse(modelId=MODEL, messages=MESSAGES)
    assert answer["output"]["message"] == {"role": "assistant", "content": [{"text": REPLY}]}
    assert answer["stopReason"] == "end_turn"
    assert answer["usage"]["outputTokens"] == len(reply_tokens())


@pytest.mark.parametrize(
    ("messages", "named"),
    [
        ([], "messages"),
        ([{"role": "robot", "content": [{"text": "Hi."}]}], "messages.0.role"),
        ([{"role": "user", "content": []}], "messages.0.content"),
        (
            [{"role": "user", "content": [{"text": " "}]}],
            "The text field in the ContentBlock object at messages.0.content.0 is blank",
        ),
        (
            [{"role": "user", "content": [{"text": "Hi."}]}, {"role": "user", "content": [{"text": "Hi?"}]}],
            "A conversation must start with a user message and alternate",
        ),
        (
            [{"role": "assistant", "content": [{"text": "Hi."}]}],
            "A conversation must start with a user message",
        ),
    ],
)
def test_a_bad_request_is_boto3s_validation_exception_naming_the_field(
    messages: list[dict[str, Any]], named: str, reference_server: ServerFactory
) -> None:
    client = _boto3(_server(reference_server))
    for call in (client.converse_stream, client.converse):
        with pytest.raises(ClientError) as raised:
            call(modelId=MODEL, messages=messages)
        error = raised.value.response["Error"]
        assert error["Code"] == "ValidationException" and error["Message"].startswith(named)
        assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        assert type(raised.value).__name__ == "ValidationException"


def test_a_request_without_an_authorization_header_is_refused(reference_server: ServerFactory) -> None:
    server = _server(reference_server)
    request = urllib.request.Request(
        f"{server.base}/model/{MODEL}/converse-stream",
        data=b'{"messages": [{"role": "user", "content": [{"text": "Hi."}]}]}',
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as raised:
        urllib.request.urlopen(request, timeout=10)
    assert raised.value.code == 403
    assert raised.value.headers["x-amzn-errortype"] == "MissingAuthenticationTokenException"
