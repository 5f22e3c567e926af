"""Inside a task: a runner that never publishes (it died with its laptop) does not leave the task billing,
and whatever stops a task is put where the runner looks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sonic_deploy.probe.in_vpc.protocol import (
    RUN,
    DirectoryStore,
    RunManifest,
    command_key,
    failed_key,
    get_json,
    level_command,
    put_json,
    ready_key,
)
from sonic_deploy.probe.in_vpc.task import serve
from sonic_deploy.probe.load import Level


def _never(command: dict[str, Any], emit: Any) -> dict[str, Any]:
    raise AssertionError("no command was published")


def test_a_task_whose_runner_is_gone_gives_up_and_says_so(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "run")
    put_json(store, RUN, RunManifest("r", 1, poll_s=0.01, idle_timeout_s=0.1).as_json())
    assert serve(store, 0, _never) == 1
    assert get_json(store, ready_key(0))["index"] == 0
    assert "no commands/0.json within 0.1 s: the runner is gone" in get_json(store, failed_key(0))["error"]


def test_a_level_that_raises_is_reported_with_its_error(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "run")
    put_json(store, RUN, RunManifest("r", 2, poll_s=0.01, idle_timeout_s=5).as_json())
    put_json(store, command_key(0), level_command(Level(0, concurrency=2, requests=2), 0.0))

    def broken(command: dict[str, Any], emit: Any) -> dict[str, Any]:
        raise OSError("Too many open files")

    assert serve(store, 1, broken) == 1
    assert get_json(store, failed_key(1)) == {"index": 1, "error": "OSError('Too many open files')"}
