"""The run's objects: the boto3 S3 adapter against botocore's Stubber (PutObject, GetObject, ListObjectsV2 in
the shapes S3 returns them), the folder that stands in for the bucket, and the statistics' trip as JSON."""

from __future__ import annotations

import datetime
import fnmatch
import io
from pathlib import Path

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber

from sonic_deploy.in_vpc import protocol
from sonic_deploy.in_vpc.protocol import (
    RUN,
    RUNNER_KEYS,
    STOP,
    TASK_KEYS,
    TRANSCRIPTS,
    DirectoryStore,
    S3Store,
    command_key,
    decode_stats,
    encode_stats,
    failed_key,
    open_store,
    part_key,
    ready_key,
    run_prefix,
    samples_key,
    stats_key,
)
from sonic_deploy.probe.stats import LevelStats

BUCKET = "sonic-dev-ecs-probebucket-1x2y3z"
PREFIX = run_prefix("ws-20261202T010000Z-abc123")
MODIFIED = datetime.datetime(2026, 12, 2, 1, 0, tzinfo=datetime.UTC)


@pytest.fixture
def s3() -> tuple[S3Store, Stubber]:
    client = boto3.client("s3", region_name="us-east-2")
    stubber = Stubber(client)
    stubber.activate()
    return S3Store(client, BUCKET, PREFIX), stubber


def test_put_get_and_list_use_the_runs_prefix(s3: tuple[S3Store, Stubber]) -> None:
    store, stubber = s3
    stubber.add_response(
        "put_object",
        {"ETag": '"9b2cf535f27731c974343645a3985328"', "ServerSideEncryption": "aws:kms"},
        {"Bucket": BUCKET, "Key": PREFIX + "ready/0.json", "Body": b'{"index": 0}'},
    )
    store.put("ready/0.json", b'{"index": 0}')
    body = b'{"kind": "done"}'
    stubber.add_response(
        "get_object",
        {"Body": StreamingBody(io.BytesIO(body), len(body)), "ContentLength": len(body), "ETag": '"e"'},
        {"Bucket": BUCKET, "Key": PREFIX + "commands/1.json"},
    )
    assert store.get("commands/1.json") == body
    stubber.add_client_error(
        "get_object",
        "NoSuchKey",
        "The specified key does not exist.",
        404,
        expected_params={"Bucket": BUCKET, "Key": ANY},
    )
    assert store.get("commands/2.json") is None
    page = {"Name": BUCKET, "Prefix": PREFIX + "ready/", "KeyCount": 1, "MaxKeys": 1000, "IsTruncated": True}
    stubber.add_response(
        "list_objects_v2",
        {**page, "Contents": [{"Key": PREFIX + "ready/0.json", "LastModified": MODIFIED, "Size": 12}],
         "NextContinuationToken": "token-2"},
        {"Bucket": BUCKET, "Prefix": PREFIX + "ready/"},
    )  # fmt: skip
    stubber.add_response(
        "list_objects_v2",
        {**page, "IsTruncated": False, "Contents": [{"Key": PREFIX + "ready/1.json", "LastModified": MODIFIED, "Size": 12}]},
        {"Bucket": BUCKET, "Prefix": PREFIX + "ready/", "ContinuationToken": "token-2"},
    )  # fmt: skip
    assert store.list("ready/") == ["ready/0.json", "ready/1.json"]
    stubber.add_response(
        "list_objects_v2",
        {"Name": BUCKET, "Prefix": PREFIX + "failed/", "KeyCount": 0, "MaxKeys": 1000, "IsTruncated": False},
        {"Bucket": BUCKET, "Prefix": PREFIX + "failed/"},
    )
    assert store.list("failed/") == []
    stubber.assert_no_pending_responses()
    assert store.where() == f"s3://{BUCKET}/{PREFIX}"


def test_a_denied_read_is_an_error_not_a_missing_object(s3: tuple[S3Store, Stubber]) -> None:
    store, stubber = s3
    stubber.add_client_error("get_object", "AccessDenied", "Access Denied", 403)
    with pytest.raises(ClientError):
        store.get("run.json")


def test_a_tasks_puts_only_create_as_its_role_requires() -> None:
    """The task role refuses a put without If-None-Match (probe_task.py): a task's store sends it."""
    client = boto3.client("s3", region_name="us-east-2")
    stubber = Stubber(client)
    stubber.activate()
    stubber.add_response(
        "put_object",
        {"ETag": '"9b2cf535f27731c974343645a3985328"'},
        {"Bucket": BUCKET, "Key": PREFIX + "ready/0.json", "Body": b"{}", "IfNoneMatch": "*"},
    )
    open_store(f"s3://{BUCKET}/{PREFIX}", client).put("ready/0.json", b"{}")
    stubber.assert_no_pending_responses()


def test_a_task_opens_the_store_its_runner_names(tmp_path: Path) -> None:
    client = boto3.client("s3", region_name="us-east-2")
    opened = open_store(f"s3://{BUCKET}/{PREFIX}", client)
    assert isinstance(opened, S3Store) and (opened.bucket, opened.prefix) == (BUCKET, PREFIX)
    folder = open_store((tmp_path / "run").as_uri())
    assert isinstance(folder, DirectoryStore)
    folder.put("results/0/1/stats.json", b"{}")
    assert folder.list("results/0/") == ["results/0/1/stats.json"]
    assert folder.get("results/0/2/stats.json") is None
    with pytest.raises(ValueError, match="not an s3://"):
        open_store("http://example.com/x")


def test_statistics_survive_the_trip_as_json_exactly() -> None:
    stats = LevelStats()
    for i in range(200):
        stats.add(
            {
                "ok": i % 9 != 0,
                "error": "status_429",
                "underruns": 0,
                "ttfa_ms": 30 + i * 0.37,
                "total_ms": 500.0 + i,
            }
        )
    import json

    merged = LevelStats()
    merged.merge(decode_stats(json.loads(json.dumps(encode_stats(stats.encode())))))
    assert merged.summary(8, None) == stats.summary(8, None)


# Every key builder of each side, with arguments of every width its keys take (a part number of six digits,
# past part_key's padding, too).
TASK_BUILT = [
    ready_key(0),
    ready_key(19),
    samples_key(0, 0),
    samples_key(12, 19),
    part_key(3, 7, 0),
    part_key(3, 7, 123456),
    stats_key(0, 19),
    failed_key(7),
]
RUNNER_BUILT = [RUN, command_key(0), command_key(41), STOP, TRANSCRIPTS]


@pytest.mark.parametrize(
    ("key", "own", "other"),
    [
        *((key, TASK_KEYS, RUNNER_KEYS) for key in TASK_BUILT),
        *((key, RUNNER_KEYS, TASK_KEYS) for key in RUNNER_BUILT),
    ],
)
def test_each_key_matches_one_pattern_of_its_side_and_none_of_the_other(
    key: str, own: tuple[str, ...], other: tuple[str, ...]
) -> None:
    """The task role's grant and the endpoint's policy are made of these patterns: a key no pattern of its side
    matches is AccessDenied in AWS, and a runner's key that a task pattern matches is one a task may forge."""
    assert sum(fnmatch.fnmatchcase(key, pattern) for pattern in own) == 1, key
    assert not any(fnmatch.fnmatchcase(key, pattern) for pattern in other), key
    assert not key.startswith("/") and ".." not in key.split("/")


def test_the_lists_above_cover_every_key_builder() -> None:
    """A new `*_key` builder in protocol.py must join TASK_BUILT or RUNNER_BUILT (and a pattern of its side)."""
    builders = {
        name for name in vars(protocol) if name.endswith("_key") and callable(getattr(protocol, name))
    }
    assert builders == {"ready_key", "command_key", "samples_key", "part_key", "stats_key", "failed_key"}
