"""How the runner and the tasks talk: JSON objects under `runs/<run-id>/` in the stack's probe bucket, written
once and never changed, so that neither side needs a lock or a conditional write.

    run.json                      the runner: the task count and how often to poll
    ready/<index>.json            a task: it parsed its options and read run.json, and waits for commands (it
                                  builds its target for each command, as a local worker process does)
    commands/<seq>.json           the runner: level <seq> (a `Level` and a wall-clock start), "turn", or "done"
    stop.json                     the runner, when a run ends early (an error, Ctrl-C): every task stops, between
                                  two requests or at its next poll (with "done" at the next <seq> too)
    results/<seq>/<index>/samples.jsonl   a task: its samples of command <seq>
    results/<seq>/<index>/stats.json      a task, after its samples: its encoded `LevelStats` (the marker)
    results/<seq>/<index>/part-<n>.jsonl  a task, while command <seq> runs: its next samples (kept for a run
                                          interrupted mid-command; the whole is samples.jsonl)
    failed/<index>.json           a task: what stopped it (the runner stops the run and shows it)
    transcripts.txt               the runner, before its tasks start: --transcripts FILE (a file of the
                                  operator's machine, not in the image)

`TASK_KEYS` and `RUNNER_KEYS` are these as patterns, the one list each side writes: the task role's S3 grant
and the S3 gateway endpoint's policy are made from them (constructs/probe_task.py, constructs/network.py).

A task trusts nothing it reads here beyond its own command line: it refuses a command that is not one its own
options make (`check_level`, in task.py), a start out of `START_WINDOW_S`, a run.json out of bounds
(`RunManifest.problem`): whoever may write the prefix cannot turn the task into a load generator of their
own. The runner escapes what a task wrote before it prints it.

The runner and the tasks reach the bucket only through `ObjectStore`: `S3Store` in AWS, `DirectoryStore`
(a folder, `file://` URLs) in tests and for rehearsing a run on one machine.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from sonic_deploy.probe.level import Level

RUN = "run.json"
STOP = "stop.json"
TRANSCRIPTS = "transcripts.txt"
RUNS_PREFIX = "runs/"
# The keys each side writes, relative to runs/<run-id>/, as glob patterns whose `*` matches '/' too, as an
# IAM resource ARN's does (IAM User Guide, "IAM JSON policy elements: Resource") and fnmatch.fnmatchcase's.
# Every key builder below makes a key that matches exactly one pattern of its side and none of the other's
# (tests/in_vpc/test_protocol.py): the task role may write only TASK_KEYS, and a task that could write
# commands/ could send the others commands.
TASK_KEYS = ("ready/*", "results/*", "failed/*")
RUNNER_KEYS = (RUN, "commands/*", STOP, TRANSCRIPTS)
# Bounds a task holds run.json to: a poll of 0 would call S3 in a tight loop, and an idle timeout of days
# would leave a task billing for them after its runner died.
POLL_BOUNDS_S = (0.2, 10.0)
MAX_IDLE_TIMEOUT_S = 3600.0
# A command's start a task accepts, from its own clock: at most this far in the past (a late poll, an
# operator's clock a little behind) and in the future (the runner publishes a few seconds ahead), so that
# a forged start cannot keep a task sleeping, billing, past every idle timeout.
START_WINDOW_S = (60.0, 120.0)


class ObjectStore(Protocol):
    """The three calls the run needs. Keys are relative to the run's prefix."""

    def put(self, key: str, body: bytes) -> None: ...

    def get(self, key: str) -> bytes | None:
        """The object, or None if there is none (yet)."""
        ...

    def list(self, prefix: str) -> list[str]:
        """The keys under `prefix` (relative to the run's prefix, as `put` takes them)."""
        ...

    def where(self) -> str:
        """The run's prefix as a URL (s3://BUCKET/runs/RUN or file:///...), for messages and tasks."""
        ...


def ready_key(index: int) -> str:
    return f"ready/{index}.json"


def command_key(seq: int) -> str:
    return f"commands/{seq}.json"


def samples_key(seq: int, index: int) -> str:
    return f"results/{seq}/{index}/samples.jsonl"


def part_key(seq: int, index: int, part: int) -> str:
    return f"results/{seq}/{index}/part-{part:05d}.jsonl"


def stats_key(seq: int, index: int) -> str:
    return f"results/{seq}/{index}/stats.json"


def failed_key(index: int) -> str:
    return f"failed/{index}.json"


def put_json(store: ObjectStore, key: str, value: object) -> None:
    store.put(key, json.dumps(value).encode())


def get_json(store: ObjectStore, key: str) -> Any:
    body = store.get(key)
    return None if body is None else json.loads(body)


@dataclass(frozen=True)
class RunManifest:
    """What every task reads first: how many tasks share the load, and how often to look for commands."""

    run_id: str
    task_count: int
    poll_s: float = 1.0
    # A task that has no command for this long gives up: a runner that died (a closed laptop) must not
    # leave tasks billing until someone notices. The runner stops its tasks itself in every other case.
    idle_timeout_s: float = 900.0

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunManifest:
        return cls(
            str(data["run_id"]), int(data["task_count"]), float(data["poll_s"]), float(data["idle_timeout_s"])
        )

    def problem(self, task_count: int) -> str | None:
        """Why a task with `--task-count task_count` refuses this run.json (None: it does not)."""
        low, high = POLL_BOUNDS_S
        if self.task_count != task_count:
            return f"run.json task_count {self.task_count} is not this task's --task-count {task_count}"
        if not low <= self.poll_s <= high:
            return f"run.json poll_s {self.poll_s:g} is not within [{low:g}, {high:g}] s"
        if not 0 < self.idle_timeout_s <= MAX_IDLE_TIMEOUT_S:
            return (
                f"run.json idle_timeout_s {self.idle_timeout_s:g} is not within (0, {MAX_IDLE_TIMEOUT_S:g}] s"
            )
        return None


def level_command(level: Level, start_at: float) -> dict[str, Any]:
    """Run `level` (each task its share), beginning at `start_at` (time.time(), seconds since the epoch)."""
    return {"kind": "level", "level": asdict(level), "start_at": start_at}


def turn_command(start_at: float) -> dict[str, Any]:
    return {"kind": "turn", "start_at": start_at}


DONE: dict[str, Any] = {"kind": "done"}


class CommandError(ValueError):
    """A command a task refuses: not one the runner of its own options would publish."""


def level_of(command: dict[str, Any]) -> Level:
    """The command's level, each field of its own type (CommandError otherwise)."""
    data = command.get("level")
    if not isinstance(data, dict) or set(data) != {f.name for f in fields(Level)}:
        raise CommandError(f"a level command's level is not a level: {data!r:.200}")

    def number(name: str, kind: type, optional: bool = False) -> Any:
        value = data[name]
        if optional and value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int):
            raise CommandError(
                f"a level command's {name} is not a{'n integer' if kind is int else ' number'}: {value!r:.100}"
            )
        if not math.isfinite(value) or value < 0:
            raise CommandError(f"a level command's {name} is out of range: {value!r}")
        return kind(value)

    if not isinstance(data["arrivals"], str):
        raise CommandError(f"a level command's arrivals is not a name: {data['arrivals']!r:.100}")
    return Level(
        index=number("index", int),
        concurrency=number("concurrency", int, optional=True),
        rate=number("rate", float, optional=True),
        requests=number("requests", int),
        duration_s=number("duration_s", float),
        warmup=number("warmup", int),
        arrivals=data["arrivals"],
    )


def start_of(command: dict[str, Any], now: float) -> float:
    """The command's wall-clock start, if within `START_WINDOW_S` of `now` (this task's clock)."""
    start_at = command.get("start_at")
    if isinstance(start_at, bool) or not isinstance(start_at, (int, float)) or not math.isfinite(start_at):
        raise CommandError(f"a command's start_at is not a time: {start_at!r:.100}")
    before, after = START_WINDOW_S
    if not now - before <= start_at <= now + after:
        raise CommandError(
            f"a command's start_at is {start_at - now:+.0f} s from this task's clock, outside [-{before:g}, "
            f"+{after:g}] s (an operator's clock that far off: set it by NTP)"
        )
    return float(start_at)


def local_start(start_at: float) -> float:
    """A wall-clock start (the runner's clock) as this process's perf_counter. Each task reads its own clock
    (Fargate's are kept by the Amazon Time Sync Service), so the tasks start together. An operator's clock
    behind theirs by more than the start delay puts the start in their past: each task then starts as soon
    as it sees the command (within a poll of the others), and reports how late (`late_s`)."""
    return time.perf_counter() + (start_at - time.time())


def encode_stats(encoded: dict[str, Any]) -> dict[str, Any]:
    """`LevelStats.encode()` as JSON: the HDR histograms' compressed form is base64 bytes."""
    return {**encoded, "histograms": {m: blob.decode("ascii") for m, blob in encoded["histograms"].items()}}


def decode_stats(data: dict[str, Any]) -> dict[str, Any]:
    return {
        **data,
        "histograms": {m: blob.encode("ascii") for m, blob in data["histograms"].items()},
        "gc": tuple(data["gc"]),
    }


class DirectoryStore:
    """A run's objects as files under a folder: the fake bucket of the tests, and `file://` runs. Each file is
    written to a partial name and renamed, so that a reader never sees half an object (as with S3)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, key: str, body: bytes) -> None:
        path = self.root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.write_bytes(body)
        partial.replace(path)

    def get(self, key: str) -> bytes | None:
        try:
            return (self.root / key).read_bytes()
        except FileNotFoundError:
            return None

    def list(self, prefix: str) -> list[str]:
        if not self.root.is_dir():
            return []
        keys = (path.relative_to(self.root).as_posix() for path in self.root.rglob("*") if path.is_file())
        return sorted(key for key in keys if key.startswith(prefix) and not key.endswith(".partial"))

    def where(self) -> str:
        return self.root.absolute().as_uri()


class S3Store:
    """The run's prefix in the stack's probe bucket, through a boto3 S3 client. The bucket encrypts what is
    put (its default encryption) and expires it (probe.results_retention_days). `create_only` (a task's
    store): every put is If-None-Match: *, which the task role requires, so no object is ever overwritten."""

    def __init__(self, client: Any, bucket: str, prefix: str, *, create_only: bool = False) -> None:
        self.client, self.bucket, self.prefix = client, bucket, prefix.rstrip("/") + "/"
        self.create_only = create_only

    def put(self, key: str, body: bytes) -> None:
        create_only = {"IfNoneMatch": "*"} if self.create_only else {}
        self.client.put_object(Bucket=self.bucket, Key=self.prefix + key, Body=body, **create_only)

    def get(self, key: str) -> bytes | None:
        from botocore.exceptions import ClientError

        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self.prefix + key)
        except ClientError as error:
            # A missing key is NoSuchKey to a caller that may list the bucket (both roles may: s3:ListBucket),
            # and AccessDenied to one that may not (S3 GetObject's documentation): that one is an error here.
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise
        body: bytes = response["Body"].read()
        return body

    def list(self, prefix: str) -> list[str]:
        keys: list[str] = []
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix + prefix):
            keys.extend(str(item["Key"])[len(self.prefix) :] for item in page.get("Contents", []))
        return sorted(keys)

    def where(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"


def run_prefix(run_id: str) -> str:
    return f"{RUNS_PREFIX}{run_id}/"


def open_store(url: str, s3_client: Any = None) -> ObjectStore:
    """The store a task is pointed at (`--in-vpc-task URL`): s3://BUCKET/runs/RUN, or file:///FOLDER."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        return DirectoryStore(Path(parts.path))
    if parts.scheme == "s3" and parts.netloc:
        if s3_client is None:
            import boto3

            s3_client = boto3.client("s3")
        return S3Store(s3_client, parts.netloc, parts.path.lstrip("/"), create_only=True)
    raise ValueError(f"{url!r} is not an s3://BUCKET/PREFIX or file:///FOLDER URL")
