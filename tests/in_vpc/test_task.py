"""Inside a task: a runner that never publishes (it died with its laptop) does not leave the task billing,
and whatever stops a task is put where the runner looks."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sonic_deploy.in_vpc.protocol import (
    RUN,
    STOP,
    DirectoryStore,
    RunManifest,
    command_key,
    failed_key,
    get_json,
    level_command,
    put_json,
    ready_key,
)
from sonic_deploy.in_vpc.task import serve
from sonic_deploy.probe.level import Level


def _never(command: dict[str, Any], emit: Any, stop: Any) -> dict[str, Any]:
    raise AssertionError("no command was published")


def test_a_task_whose_runner_is_gone_gives_up_and_says_so(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "run")
    put_json(store, RUN, RunManifest("r", 1, poll_s=0.2, idle_timeout_s=0.1).as_json())
    assert serve(store, 0, 1, _never) == 1
    assert get_json(store, ready_key(0))["index"] == 0
    assert "no commands/0.json within 0.1 s: the runner is gone" in get_json(store, failed_key(0))["error"]


def test_a_level_that_raises_is_reported_with_its_error(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "run")
    put_json(store, RUN, RunManifest("r", 2, poll_s=0.2, idle_timeout_s=5).as_json())
    put_json(store, command_key(0), level_command(Level(0, concurrency=2, requests=2), 0.0))

    def broken(command: dict[str, Any], emit: Any, stop: Any) -> dict[str, Any]:
        raise OSError("Too many open files")

    assert serve(store, 1, 2, broken) == 1
    assert get_json(store, failed_key(1)) == {"index": 1, "error": "OSError('Too many open files')"}


def _level_task(store: DirectoryStore, count: int = 2) -> int:
    """Task 1 of `count` of `probe ws ... --concurrency 2,4 --requests 10`, whose levels never run here."""
    from sonic_deploy.in_vpc.task import level_runner

    levels = [Level(0, concurrency=2, requests=10, warmup=2), Level(1, concurrency=4, requests=10, warmup=4)]

    def permitted(level: Level) -> str | None:
        return None if level in levels else f"{level} is not one of its own levels"

    runner = level_runner(None, 1, count, permitted)  # type: ignore[arg-type]  # never reaches the target
    return serve(store, 1, count, runner)


@pytest.mark.parametrize(
    ("command", "said"),
    [
        ({"kind": "shell", "start_at": 0.0}, "a level task got a 'shell' command"),
        (
            level_command(Level(0, concurrency=500, requests=10, warmup=2), 0.0),
            "is not one of its own levels",
        ),
        (
            level_command(Level(0, concurrency=2, requests=10**6, warmup=2), 0.0),
            "is not one of its own levels",
        ),
        (level_command(Level(0, concurrency=2, requests=10, warmup=2), 1e12), "outside [-60, +120] s"),
        (level_command(Level(0, concurrency=2, requests=10, warmup=2), -1.0), "outside [-60, +120] s"),
        ({"kind": "level", "level": {"index": 0, "concurrency": "2"}, "start_at": 0.0}, "is not a level"),
    ],
)
def test_a_task_refuses_a_command_its_own_options_do_not_make(
    command: dict[str, Any], said: str, tmp_path: Path
) -> None:
    """Whoever may write the run's prefix cannot make a task load anything else, or sleep and bill."""
    store = DirectoryStore(tmp_path / "run")
    put_json(store, RUN, RunManifest("r", 2, poll_s=0.2, idle_timeout_s=5).as_json())
    if command.get("start_at") == 0.0:
        command = {**command, "start_at": time.time()}
    put_json(store, command_key(0), command)
    assert _level_task(store) == 1
    assert said in get_json(store, failed_key(1))["error"]


@pytest.mark.parametrize(
    ("manifest", "said"),
    [
        (RunManifest("r", 3, poll_s=1.0), "task_count 3 is not this task's --task-count 2"),
        (RunManifest("r", 2, poll_s=0.0), "poll_s 0 is not within [0.2, 10] s"),
        (RunManifest("r", 2, idle_timeout_s=1e12), "idle_timeout_s 1e+12 is not within (0, 3600] s"),
    ],
)
def test_a_task_refuses_a_run_json_out_of_bounds(manifest: RunManifest, said: str, tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "run")
    put_json(store, RUN, manifest.as_json())
    assert _level_task(store) == 1
    assert said in get_json(store, failed_key(1))["error"]
    assert get_json(store, ready_key(1)) is None


def test_stop_json_ends_a_task_waiting_for_its_next_command(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "run")
    put_json(store, RUN, RunManifest("r", 1, poll_s=0.2, idle_timeout_s=60).as_json())
    put_json(store, STOP, {"kind": "stop"})
    assert serve(store, 0, 1, _never) == 0
    assert get_json(store, failed_key(0)) is None


def test_stop_json_ends_a_level_between_two_requests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The watcher sets the event once stop.json is there; the command's loop checks it between requests
    and the task uploads what it ran, then stops."""
    store = DirectoryStore(tmp_path / "run")
    put_json(store, RUN, RunManifest("r", 1, poll_s=0.2, idle_timeout_s=60).as_json())
    put_json(store, command_key(0), level_command(Level(0, concurrency=1, requests=10**6), time.time()))
    ran: list[int] = []

    def endless(command: dict[str, Any], emit: Any, stop: threading.Event) -> dict[str, Any]:
        while not stop.is_set():  # a request, then a look at the stop
            emit({"n": len(ran)})
            ran.append(1)
            if len(ran) == 3:
                put_json(store, STOP, {"kind": "stop"})
            stop.wait(0.05)
        return {"requests": len(ran)}

    from sonic_deploy.in_vpc import task
    from sonic_deploy.in_vpc.runner import InVpcRun, Timing

    monkeypatch.setattr(task, "PART_EVERY_S", 0.0)  # a part at every poll
    assert serve(store, 0, 1, endless) == 0
    assert get_json(store, "results/0/0/stats.json") == {"requests": len(ran)}
    assert len(ran) >= 3
    # The parts, uploaded as it ran, hold every sample once, in order: what an interrupted runner collects.
    parts = store.list("results/0/0/part-")
    assert parts
    lines = [line for key in parts for line in (store.get(key) or b"").decode().splitlines()]
    assert [json.loads(line)["n"] for line in lines] == list(range(len(lines)))
    run = InVpcRun(None, store, 1, Timing(), lambda text: None)  # type: ignore[arg-type]
    run.seq = 1
    assert [s["n"] for s in run.partial()] == list(range(len(ran)))  # finished: its whole samples.jsonl


def test_sigterm_ends_a_level_and_the_task_uploads_what_it_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ECS's StopTask is a SIGTERM (a SIGKILL 30 s later): the task stops the command as stop.json does,
    uploads a part and the whole, exits 0, and gives the signal's handler back."""
    import os
    import signal

    store = DirectoryStore(tmp_path / "run")
    put_json(store, RUN, RunManifest("r", 1, poll_s=0.2, idle_timeout_s=60).as_json())
    put_json(store, command_key(0), level_command(Level(0, concurrency=1, requests=10**6), time.time()))
    ran: list[int] = []
    caught: list[int] = []

    def endless(command: dict[str, Any], emit: Any, stop: threading.Event) -> dict[str, Any]:
        while not stop.is_set() and len(ran) < 2000:  # a bail-out, should the signal not stop it
            emit({"n": len(ran)})
            ran.append(1)
            if len(ran) == 3:
                os.kill(os.getpid(), signal.SIGTERM)  # what StopTask sends
            stop.wait(0.05)
        return {"requests": len(ran)}

    from sonic_deploy.in_vpc import task

    monkeypatch.setattr(task, "PART_EVERY_S", 3600.0)  # the part is the one uploaded on the signal
    own = signal.signal(signal.SIGTERM, lambda signum, frame: caught.append(signum))  # never pytest's death
    try:
        assert serve(store, 0, 1, endless) == 0
        assert not caught  # the task's handler had it
        os.kill(os.getpid(), signal.SIGTERM)  # after serve: the handler before it is back
        assert caught == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, own)
    assert 3 <= len(ran) < 2000
    assert get_json(store, "results/0/0/stats.json") == {"requests": len(ran)}
    assert len((store.get("results/0/0/samples.jsonl") or b"").decode().splitlines()) == len(ran)
    (part,) = store.list("results/0/0/part-")
    assert [json.loads(line)["n"] for line in (store.get(part) or b"").decode().splitlines()][:3] == [0, 1, 2]
    assert "stopped: SIGTERM (ECS StopTask)" in capsys.readouterr().err
    assert get_json(store, STOP) is None  # the signal alone stopped it


def test_sigterm_ends_a_task_waiting_for_its_next_command(tmp_path: Path) -> None:
    import os
    import signal

    store = DirectoryStore(tmp_path / "run")
    put_json(store, RUN, RunManifest("r", 1, poll_s=0.2, idle_timeout_s=60).as_json())
    own = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))
        timer.start()
        assert serve(store, 0, 1, _never) == 0  # not the idle timeout's 60 s, nor a failure
        timer.join()
    finally:
        signal.signal(signal.SIGTERM, own)
    assert get_json(store, ready_key(0))["index"] == 0 and get_json(store, failed_key(0)) is None
