"""Inside one probe task (`sonic-deploy probe ... --in-vpc-task URL --task-index I --task-count N`): announce
that it is ready, then run each command the runner publishes, uploading what it measured, until "done".

A level is run as a worker process of a local run is (workers.py): `run_level(settings, level, I, N, ...)`,
this task's share of it, from the start the runner chose, so that the N tasks load the target together."""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from sonic_deploy.probe.in_vpc.protocol import (
    RUN,
    ObjectStore,
    RunManifest,
    command_key,
    encode_stats,
    failed_key,
    get_json,
    level_of,
    local_start,
    put_json,
    ready_key,
    samples_key,
    stats_key,
)
from sonic_deploy.probe.load import ProbeSettings

# What a task does with one command: run it, emitting each sample, and return what goes in stats.json.
RunCommand = Callable[[dict[str, Any], Callable[[dict[str, Any]], None]], dict[str, Any]]


class RunnerGoneError(Exception):
    """No command within the run's idle timeout: the runner is gone (it stops its tasks in every other case)."""


def _say(text: str) -> None:
    # The task's log (CloudWatch Logs, through the task definition's log driver): one line a step.
    print(f"probe task: {text}", file=sys.stderr, flush=True)


def _wait_for(store: ObjectStore, key: str, manifest: RunManifest) -> dict[str, Any]:
    deadline = time.monotonic() + manifest.idle_timeout_s
    while (found := get_json(store, key)) is None:
        if time.monotonic() > deadline:
            raise RunnerGoneError(
                f"no {key} within {manifest.idle_timeout_s:g} s: the runner is gone, stopping"
            )
        time.sleep(manifest.poll_s)
    result: dict[str, Any] = found
    return result


def serve(store: ObjectStore, index: int, run_command: RunCommand) -> int:
    """The task's life: ready, then each command in turn. 0 after "done"; 1 after a failure, which is also
    put where the runner looks (failed/INDEX.json), so that it stops the run and says why."""
    try:
        manifest = RunManifest.from_json(_wait_for(store, RUN, RunManifest("", 0, 0.2, 300.0)))
        put_json(store, ready_key(index), {"index": index, "host": socket.gethostname(), "at": time.time()})
        _say(f"task {index} of {manifest.task_count} ready ({store.where()})")
        seq = 0
        while (command := _wait_for(store, command_key(seq), manifest))["kind"] != "done":
            samples: list[dict[str, Any]] = []
            result = run_command(command, samples.append)
            lines = "".join(json.dumps({**sample, "task": index}) + "\n" for sample in samples)
            store.put(samples_key(seq, index), lines.encode())
            put_json(store, stats_key(seq, index), result)  # last: the runner waits for it
            _say(f"command {seq} ({command['kind']}): {len(samples)} samples uploaded")
            seq += 1
        _say("done")
        return 0
    except Exception as error:  # the runner must hear of it, whatever it is
        _say(f"failed: {error!r}")
        try:
            put_json(store, failed_key(index), {"index": index, "error": repr(error)})
        except Exception as also:
            _say(f"could not report the failure either: {also!r}")
        return 1


def level_runner(settings: ProbeSettings, index: int, count: int) -> RunCommand:
    """Each level command: this task's share of it, from the runner's start time."""
    from sonic_deploy.probe import event_loop
    from sonic_deploy.probe.load import run_level

    def run_command(command: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        if command["kind"] != "level":
            raise ValueError(f"a level run got a {command['kind']!r} command")
        start = local_start(float(command["start_at"]))
        late_s = max(0.0, time.perf_counter() - start)
        stats = event_loop.run(run_level(settings, level_of(command), index, count, emit, start))
        return {"stats": encode_stats(stats.encode()), "late_s": round(late_s, 3)}

    return run_command
