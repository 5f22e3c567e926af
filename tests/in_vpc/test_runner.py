"""The runner against botocore's Stubber (RunTask, DescribeTasks, StopTask and DescribeStacks in the shapes
ECS and CloudFormation return them): start, wait, collect, merge, and every task stopped on success, on an
error, on Ctrl-C and on SIGTERM. The tasks here are threads running the real task loop (task.serve) on a
folder as the bucket."""

from __future__ import annotations

import gc
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import boto3
import pytest
from botocore.stub import Stubber

from sonic_deploy.cli import main
from sonic_deploy.in_vpc import session as in_vpc
from sonic_deploy.in_vpc.arguments import LOCAL_OPTIONS, task_argv
from sonic_deploy.in_vpc.fleet import (
    Fleet,
    InVpcError,
    ProbeDeployment,
    choose_tasks,
    find_deployment,
    tasks_needed,
)
from sonic_deploy.in_vpc.protocol import (
    STOP,
    DirectoryStore,
    command_key,
    encode_stats,
    get_json,
    put_json,
    ready_key,
)
from sonic_deploy.in_vpc.runner import Terminated, Timing, run_schedule_in_vpc
from sonic_deploy.in_vpc.task import serve
from sonic_deploy.probe.level import Level
from sonic_deploy.probe.stats import LevelStats
from sonic_deploy.probe.workers import fixed
from tests.connect.conftest import REGION, stack_description
from tests.probe.private_ca import make_private_ca

from .conftest import CONFIG
from .fakes import CLUSTER, ECS_OUTPUTS, PROBE_OUTPUTS, TASK_DEFINITION, task, task_arn

# DescribeTasks once while waiting for the tasks to be ready, and never during a level: the Stubber's
# queue of answers is then the same on every run.
QUIET = Timing(
    poll_s=0.01,
    describe_every_s=3600,
    ready_timeout_s=30,
    start_delay_s=0.05,
    task_poll_s=0.2,
    relist_after_s=0.01,
)
DEPLOYMENT = ProbeDeployment(
    environment="dev",
    route="ecs",
    stack_name="sonic-dev-ecs",
    region=REGION,
    cluster=CLUSTER,
    task_definition=TASK_DEFINITION,
    container="probe",
    subnets=("subnet-0a1b2c3d4e5f60718", "subnet-0f1e2d3c4b5a69788"),
    security_group="sg-0123456789abcdef0",
    bucket=PROBE_OUTPUTS["ProbeBucket"],
    outputs=ECS_OUTPUTS,
)
RUN_ID = "ws-20261202T010000Z-abc123"


@pytest.fixture
def ecs() -> Iterator[tuple[Any, Stubber]]:
    client = boto3.client("ecs", region_name=REGION)
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def _command(index: int) -> list[str]:
    return ["probe", "ws", "--url", "ws://10.0.0.1/tts/websocket", "--task-index", str(index)]


def _expect_run_task(stubber: Stubber, n: int) -> None:
    stubber.add_response(
        "run_task",
        {"tasks": [task(n)], "failures": []},
        {
            "cluster": CLUSTER,
            "taskDefinition": TASK_DEFINITION,
            "count": 1,
            "launchType": "FARGATE",
            "networkConfiguration": {
                "awsvpcConfiguration": {
                    "subnets": list(DEPLOYMENT.subnets),
                    "securityGroups": ["sg-0123456789abcdef0"],
                    "assignPublicIp": "DISABLED",
                }
            },
            "overrides": {"containerOverrides": [{"name": "probe", "command": _command(n)}]},
            "startedBy": RUN_ID,
            "tags": [{"key": "sonic-deploy:probe-run", "value": RUN_ID}],
        },
    )


def _expect_describe(stubber: Stubber, *described: dict[str, Any]) -> None:
    stubber.add_response(
        "describe_tasks",
        {"tasks": list(described), "failures": []},
        {"cluster": CLUSTER, "tasks": [t["taskArn"] for t in described]},
    )


def _expect_stop(
    stubber: Stubber, *numbers: int, unrecorded: int | None = None, ended_early: bool = True
) -> None:
    """ListTasks by the run's startedBy (what ECS still runs of it), then StopTask for each task; a run that
    ended early lists them again a little later (a task whose RunTask answer was lost may be listed late)."""
    listed = [task_arn(n) for n in numbers] + ([] if unrecorded is None else [task_arn(unrecorded)])
    stubber.add_response("list_tasks", {"taskArns": listed}, {"cluster": CLUSTER, "startedBy": RUN_ID})
    if unrecorded is not None:
        numbers = (*numbers, unrecorded)
    for n in numbers:
        stopped = task(n, "RUNNING", desiredStatus="STOPPED")
        stubber.add_response(
            "stop_task",
            {"task": stopped},
            {"cluster": CLUSTER, "task": task_arn(n), "reason": ANY},
        )
    if ended_early:
        stubber.add_response("list_tasks", {"taskArns": []}, {"cluster": CLUSTER, "startedBy": RUN_ID})


def _session(client: Any, store: DirectoryStore, count: int, timing: Timing = QUIET) -> in_vpc.Session:
    said: list[str] = []
    fleet = Fleet(client, DEPLOYMENT, RUN_ID, said.append)
    return in_vpc.Session(DEPLOYMENT, fleet, store, count, _command, timing, said.append)


def _records(worker: int, count: int) -> list[dict[str, Any]]:
    """A task's measured samples, as run_level emits them (the fields LevelStats reads)."""
    base = {"level": 0, "concurrency": 4, "rate": None, "warmup": False, "underruns": 0, "worker": worker}
    return [
        {**base, "seq": i, "ok": i % 7 != 3, "error": None if i % 7 != 3 else "status_429",
         "ttfa_ms": 40.0 + 13.7 * worker + 3.1 * i, "total_ms": 400.0 + i, "time": 1.0 + i}
        for i in range(count)
    ]  # fmt: skip


def _fake_task(store: DirectoryStore, index: int, count: int, fail: bool = False) -> threading.Thread:
    """A task: the real task loop, whose levels emit synthetic samples and their LevelStats."""

    def run_command(
        command: dict[str, Any], emit: Callable[[dict[str, Any]], None], stop: threading.Event
    ) -> dict[str, Any]:
        if fail:
            raise RuntimeError("the target refused every connection")
        level = Level(**command["level"])
        stats = LevelStats()
        for record in _records(index, level.share(index, count).requests):
            stats.add(record)
            emit(record)
        return {"stats": encode_stats(stats.encode()), "late_s": 0.0}

    thread = threading.Thread(target=serve, args=(store, index, count, run_command), daemon=True)
    thread.start()
    return thread


class _Sink:
    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.levels: list[LevelStats] = []

    def begin_level(self, level: Level) -> None:
        pass

    def record(self, record: dict[str, Any]) -> None:
        self.records.append(record)

    def level_done(self, level: Level, stats: LevelStats) -> None:
        self.levels.append(stats)


def test_a_run_starts_waits_collects_merges_exactly_and_stops_every_task(
    ecs: tuple[Any, Stubber], tmp_path: Path
) -> None:
    client, stubber = ecs
    for n in range(3):
        _expect_run_task(stubber, n)
    _expect_describe(stubber, task(0, "RUNNING"), task(1, "PENDING"), task(2, "PROVISIONING"))
    _expect_stop(stubber, 0, 1, 2, ended_early=False)
    store = DirectoryStore(tmp_path / "run")
    threads = [_fake_task(store, i, 3) for i in range(3)]
    sink = _Sink()
    session = _session(client, store, 3)
    level = Level(0, concurrency=4, requests=50)
    session.run(lambda conversation: run_schedule_in_vpc(conversation, fixed([level]), sink, 30.0))
    for thread in threads:
        thread.join(timeout=10)
        assert not thread.is_alive()  # each saw "done"
    (merged,) = sink.levels
    whole = LevelStats()
    for record in (r for i in range(3) for r in _records(i, level.share(i, 3).requests)):
        whole.add(record)
    assert merged.summary(4, None) == whole.summary(4, None)
    assert len(sink.records) == 50
    assert {r["task"] for r in sink.records} == {0, 1, 2}


def test_run_task_failures_stop_what_started_and_say_why(ecs: tuple[Any, Stubber], tmp_path: Path) -> None:
    client, stubber = ecs
    _expect_run_task(stubber, 0)
    stubber.add_response(
        "run_task",
        {"tasks": [], "failures": [{"reason": "Capacity is unavailable at this time. Please try again later or in a different availability zone"}]},
    )  # fmt: skip
    _expect_stop(stubber, 0)
    with pytest.raises(InVpcError, match=r"could not start task 1 of 2: Capacity is unavailable"):
        _session(client, DirectoryStore(tmp_path / "run"), 2).run(lambda conversation: None)


def test_a_task_that_cannot_pull_its_image_is_shown_and_every_task_stopped(
    ecs: tuple[Any, Stubber], tmp_path: Path
) -> None:
    client, stubber = ecs
    _expect_run_task(stubber, 0)
    _expect_run_task(stubber, 1)
    pull = (
        "CannotPullContainerError: pull image manifest has been retried 7 time(s): failed to resolve ref "
        "123456789012.dkr.ecr.us-east-2.amazonaws.com/sonic-dev/probe:latest: not found"
    )
    stopped = task(1, "STOPPED", stopCode="TaskFailedToStart", stoppedReason=pull, container={"reason": pull})
    _expect_describe(stubber, task(0, "RUNNING"), stopped)
    _expect_stop(stubber, 0, 1)
    with pytest.raises(InVpcError, match=r"task 1 .* stopped: CannotPullContainerError"):
        _session(client, DirectoryStore(tmp_path / "run"), 2).run(lambda conversation: None)


def test_a_task_that_never_becomes_ready_times_out_and_is_stopped(
    ecs: tuple[Any, Stubber], tmp_path: Path
) -> None:
    client, stubber = ecs
    _expect_run_task(stubber, 0)
    _expect_describe(stubber, task(0, "PROVISIONING"))
    _expect_stop(stubber, 0)
    impatient = Timing(
        poll_s=0.01, describe_every_s=3600, ready_timeout_s=0.2, start_delay_s=0.05, relist_after_s=0.01
    )
    with pytest.raises(InVpcError, match=r"only 0 of 1 tasks ready after 0.2 s \(1 PROVISIONING"):
        _session(client, DirectoryStore(tmp_path / "run"), 1, impatient).run(lambda conversation: None)


def test_a_task_that_fails_mid_run_stops_the_run(ecs: tuple[Any, Stubber], tmp_path: Path) -> None:
    client, stubber = ecs
    for n in range(2):
        _expect_run_task(stubber, n)
    _expect_describe(stubber, task(0, "RUNNING"), task(1, "RUNNING"))
    _expect_stop(stubber, 0, 1)
    store = DirectoryStore(tmp_path / "run")
    _fake_task(store, 0, 2)
    _fake_task(store, 1, 2, fail=True)
    with pytest.raises(InVpcError, match=r"task 1 failed: RuntimeError.*refused every connection"):
        _session(client, store, 2).run(
            lambda conversation: run_schedule_in_vpc(
                conversation, fixed([Level(0, concurrency=2, requests=4)]), _Sink(), 30.0
            )
        )


def test_a_task_stopped_by_ecs_mid_level_stops_the_run(ecs: tuple[Any, Stubber], tmp_path: Path) -> None:
    client, stubber = ecs
    _expect_run_task(stubber, 0)
    _expect_describe(stubber, task(0, "RUNNING"))
    stopped = task(0, "STOPPED", stopCode="SpotInterruption", stoppedReason="Task stopped by user")
    _expect_describe(stubber, stopped)
    _expect_stop(stubber, 0)
    store = DirectoryStore(tmp_path / "run")
    put_json(store, ready_key(0), {"index": 0})  # ready, then silent: it never reports the level
    watchful = Timing(
        poll_s=0.01, describe_every_s=0.0, ready_timeout_s=30, start_delay_s=0.05, relist_after_s=0.01
    )
    with pytest.raises(InVpcError, match=r"task 0 .* stopped: Task stopped by user"):
        _session(client, store, 1, watchful).run(
            lambda conversation: run_schedule_in_vpc(
                conversation, fixed([Level(0, concurrency=1, requests=1)]), _Sink(), 30.0
            )
        )


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm", "sighup"])
def test_ctrl_c_sigterm_and_sighup_stop_every_task(
    how: str, ecs: tuple[Any, Stubber], tmp_path: Path
) -> None:
    client, stubber = ecs
    for n in range(2):
        _expect_run_task(stubber, n)
    _expect_describe(stubber, task(0, "RUNNING"), task(1, "RUNNING"))
    _expect_stop(stubber, 0, 1)
    store = DirectoryStore(tmp_path / "run")
    for n in range(2):
        put_json(store, ready_key(n), {"index": n})
    sent = {"ctrl-c": signal.SIGINT, "sigterm": signal.SIGTERM, "sighup": signal.SIGHUP}[how]
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}

    def interrupted(conversation: object) -> None:
        os.kill(os.getpid(), sent)
        pytest.fail("the signal did not stop the run")

    with pytest.raises(KeyboardInterrupt) as raised:
        _session(client, store, 2).run(interrupted)
    if how == "ctrl-c":
        assert type(raised.value) is KeyboardInterrupt
    else:
        assert isinstance(raised.value, Terminated) and raised.value.exit_code == 128 + sent
    # The handlers of before the run are back, and the tasks were told to stop (stop.json, done at seq 0).
    assert {sig: signal.getsignal(sig) for sig in before} == before
    assert get_json(store, STOP) == {"kind": "stop"} and get_json(store, command_key(0)) == {"kind": "done"}


class _Interrupting:
    """The ECS client, and a signal sent to this process inside the n-th call of `method` (after ECS has
    answered it: as a Ctrl-C that comes while the answer is on its way)."""

    def __init__(self, client: Any, method: str, nth: int, signum: int) -> None:
        self.client, self.method, self.nth, self.signum, self.calls = client, method, nth, signum, 0

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.client, name)
        if name != self.method:
            return attribute

        def call(**kwargs: Any) -> Any:
            answer = attribute(**kwargs)
            self.calls += 1
            if self.calls == self.nth:
                os.kill(os.getpid(), self.signum)
            return answer

        return call


def test_ctrl_c_during_run_task_stops_the_task_whose_answer_was_lost(
    ecs: tuple[Any, Stubber], tmp_path: Path
) -> None:
    """Ctrl-C inside the second RunTask: its ARN is never recorded; ListTasks finds it, and it is stopped."""
    client, stubber = ecs
    for n in range(2):
        _expect_run_task(stubber, n)
    _expect_stop(stubber, 0, unrecorded=1)
    store = DirectoryStore(tmp_path / "run")
    said: list[str] = []
    fleet = Fleet(_Interrupting(client, "run_task", 2, signal.SIGINT), DEPLOYMENT, RUN_ID, said.append)
    session = in_vpc.Session(DEPLOYMENT, fleet, store, 3, _command, QUIET, said.append)
    with pytest.raises(KeyboardInterrupt):
        session.run(lambda conversation: None)
    assert fleet.arns == [task_arn(0), task_arn(1)]
    assert "stopped 2 of 2 tasks" in said


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_while_stopping_skips_no_stop_task(
    signum: int, ecs: tuple[Any, Stubber], tmp_path: Path
) -> None:
    client, stubber = ecs
    for n in range(3):
        _expect_run_task(stubber, n)
    _expect_describe(stubber, *(task(n, "RUNNING") for n in range(3)))
    _expect_stop(stubber, 0, 1, 2)
    store = DirectoryStore(tmp_path / "run")
    for n in range(3):
        put_json(store, ready_key(n), {"index": n})
    said: list[str] = []
    fleet = Fleet(_Interrupting(client, "stop_task", 1, signum), DEPLOYMENT, RUN_ID, said.append)
    session = in_vpc.Session(DEPLOYMENT, fleet, store, 3, _command, QUIET, said.append)

    def interrupted(conversation: object) -> None:
        raise KeyboardInterrupt  # the first Ctrl-C; the signal inside the first StopTask is the second

    with pytest.raises(KeyboardInterrupt):
        session.run(interrupted)
    assert "stopped 3 of 3 tasks" in said  # the Stubber also checks that each StopTask was made


def test_the_stack_not_deployed_older_or_not_ready_is_one_line() -> None:
    client = boto3.client("cloudformation", region_name=REGION)
    with Stubber(client) as stubber:
        stubber.add_client_error(
            "describe_stacks", "ValidationError", "Stack with id sonic-dev-ecs does not exist", 400
        )
        with pytest.raises(
            InVpcError, match=r"stack sonic-dev-ecs is not deployed. Fix: make deploy ENV=dev ROUTE=ecs"
        ):
            find_deployment(client, "dev", "ecs", "sonic-dev-ecs")
        older = {k: v for k, v in ECS_OUTPUTS.items() if not k.startswith("Probe")}
        stubber.add_response("describe_stacks", stack_description("sonic-dev-ecs", older))
        with pytest.raises(
            InVpcError, match=r"no output ProbeCluster, ProbeTaskDefinition, .*older sonic-deploy"
        ):
            find_deployment(client, "dev", "ecs", "sonic-dev-ecs")
        stubber.add_response(
            "describe_stacks", stack_description("sonic-dev-ecs", ECS_OUTPUTS, "ROLLBACK_COMPLETE")
        )
        with pytest.raises(InVpcError, match=r"is ROLLBACK_COMPLETE"):
            find_deployment(client, "dev", "ecs", "sonic-dev-ecs")
        stubber.add_response("describe_stacks", stack_description("sonic-dev-ecs", ECS_OUTPUTS))
        assert find_deployment(client, "dev", "ecs", "sonic-dev-ecs") == DEPLOYMENT


def test_no_credentials_is_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    # What earlier tests left for the collector ("Task was destroyed but it is pending!", an unclosed session)
    # is said now, not on this test's stderr: seen twice as a second line.
    gc.collect()
    capsys.readouterr()
    code = main(
        [
            "probe",
            "ws",
            "--in-vpc",
            "dev",
            "--config-dir",
            CONFIG,
            "--concurrency",
            "1",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "cloudformation:DescribeStacks on sonic-dev-ecs: no AWS credentials. Fix: sign in" in line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--api-key", "k"], "--api-key is not sent to the tasks"),
        (["--ca-bundle", "CA"], "--ca-bundle names a file on this machine"),
        (["--workers", "2"], "--workers splits a run on this machine"),
    ],
)
def test_options_that_make_no_sense_in_the_vpc_are_refused(
    extra: list[str], said: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if "CA" in extra:
        extra = ["--ca-bundle", str(make_private_ca(tmp_path).ca)]
    with pytest.raises(SystemExit) as stopped:
        main(["probe", "ws", "--in-vpc", "dev", *extra])
    assert stopped.value.code == 2
    assert said in capsys.readouterr().err


def test_tasks_without_in_vpc_and_a_missing_url_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, said in (
        (
            ["probe", "ws", "--url", "ws://127.0.0.1:9/tts/websocket", "--tasks", "2"],
            "--tasks is for --in-vpc ENV",
        ),
        (["probe", "ws"], "--url is required. Fix: give --url, or --in-vpc ENV"),
        (["probe", "sagemaker"], "--endpoint is required"),
    ):
        with pytest.raises(SystemExit):
            main(argv)
        assert said in capsys.readouterr().err


def test_more_tasks_than_max_tasks_are_refused_before_any_aws_call(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(in_vpc, "aws_clients", lambda *a: pytest.fail("called AWS"))
    assert main(["probe", "ws", "--in-vpc", "dev", "--config-dir", CONFIG, "--concurrency", "1000"]) == 2
    err = capsys.readouterr().err
    assert "concurrency 1000 needs 32 tasks, more than probe.max_tasks = 20" in err
    assert "Fix:" in err


def test_the_number_of_tasks_follows_the_load() -> None:
    assert tasks_needed(64, None, 32, 20.0) == 2
    assert tasks_needed(65, None, 32, 20.0) == 3
    assert tasks_needed(None, 45.0, 32, 20.0) == 3
    assert tasks_needed(1, None, 32, 20.0) == 1
    assert choose_tasks(3, None, 20, "x", "f") == 3
    assert choose_tasks(3, 7, 20, "x", "f") == 7
    with pytest.raises(InVpcError, match=r"--tasks 21, more than probe.max_tasks = 20"):
        choose_tasks(3, 21, 20, "x", "f")


def test_the_task_command_drops_local_options_in_every_spelling() -> None:
    from sonic_deploy.cli import build_parser
    from tests.fuzz.arguments import subparser

    parser = subparser(build_parser(), ["probe", "ws"])
    argv = [
        "--in-vpc=dev",
        "--out",
        "here",
        "--concurrency",
        "4",
        "--tasks",
        "3",
        "--conf",
        "config",
        "--api-key",
        "secret",
        "--quiet",
        "--prof",
        "p",
    ]
    kept = task_argv(parser, argv, LOCAL_OPTIONS, ["--task-index", "0"])
    assert kept == ["--concurrency", "4", "--quiet", "--task-index", "0"]


def test_a_task_ecs_started_as_ctrl_c_came_is_stopped_too(ecs: tuple[Any, Stubber]) -> None:
    client, stubber = ecs
    fleet = Fleet(client, DEPLOYMENT, RUN_ID, lambda text: None)
    fleet.arns = [task_arn(0)]  # task 1's RunTask was answered, but its ARN never recorded
    _expect_stop(stubber, 0, unrecorded=1, ended_early=False)
    fleet.stop_all("interrupted")
    assert fleet.arns == [task_arn(0), task_arn(1)]


class _DeniedStore(DirectoryStore):
    def put(self, key: str, body: bytes) -> None:
        from botocore.exceptions import ClientError

        error = {
            "Error": {"Code": "AccessDenied", "Message": "User is not authorized to perform: s3:PutObject"}
        }
        raise ClientError(error, "PutObject")  # type: ignore[arg-type]


def test_a_bucket_that_refuses_the_runner_is_one_line_and_nothing_left_running(
    ecs: tuple[Any, Stubber], tmp_path: Path
) -> None:
    client, stubber = ecs
    _expect_stop(stubber)  # none started: ListTasks finds none
    with pytest.raises(InVpcError, match=r"the run's objects in .* failed: AccessDenied: .*s3:PutObject"):
        _session(client, _DeniedStore(tmp_path / "run"), 2).run(lambda conversation: None)


def _one_ready_task(stubber: Stubber, store: DirectoryStore, described: bool = True) -> None:
    _expect_run_task(stubber, 0)
    if described:  # not when the run fails before it first describes the tasks
        _expect_describe(stubber, task(0, "RUNNING"))
    _expect_stop(stubber, 0)
    put_json(store, ready_key(0), {"index": 0})


def _level(conversation: Any) -> None:
    run_schedule_in_vpc(conversation, fixed([Level(0, concurrency=1, requests=1)]), _Sink(), 30.0)


@pytest.mark.parametrize(
    ("stats", "samples", "said"),
    [
        (
            {"stats": {"histograms": {"ttfa_ms": "not base64!"}}},
            b"",
            r"results/0/0/stats.json is not what a task writes",
        ),
        ({"late_s": 0}, b"", r"results/0/0/stats.json is not what a task writes: KeyError\('stats'\)"),
        (None, None, r"task 0 wrote its stats but no results/0/0/samples.jsonl"),
        (None, b"{not json\n", r"results/0/0/samples.jsonl is not what a task writes: JSONDecodeError"),
    ],
)
def test_malformed_or_missing_results_are_one_line_and_every_task_stopped(
    stats: dict[str, Any] | None, samples: bytes | None, said: str, ecs: tuple[Any, Stubber], tmp_path: Path
) -> None:
    client, stubber = ecs
    store = DirectoryStore(tmp_path / "run")
    _one_ready_task(stubber, store)
    if stats is None:
        good = LevelStats()
        for record in _records(0, 1):
            good.add(record)
        stats = {"stats": encode_stats(good.encode()), "late_s": 0.0}
    if samples is not None:
        store.put("results/0/0/samples.jsonl", samples)
    put_json(store, "results/0/0/stats.json", stats)
    with pytest.raises(InVpcError, match=said):
        _session(client, store, 1).run(_level)


def test_what_a_task_wrote_is_escaped_before_it_is_printed(ecs: tuple[Any, Stubber], tmp_path: Path) -> None:
    client, stubber = ecs
    store = DirectoryStore(tmp_path / "run")
    _one_ready_task(stubber, store, described=False)
    put_json(store, "failed/0.json", {"index": 0, "error": "boom\x1b]0;owned\x07\nsecond line"})
    session = _session(client, store, 1)
    said: list[str] = []
    session.fleet.say = said.append
    with pytest.raises(InVpcError) as raised:
        session.run(_level)
    text = str(raised.value)
    assert "\x1b" not in text and "\n" not in text and "\x07" not in text
    assert r"boom\x1b]0;owned\x07\nsecond line" in text
    assert "stopped 1 of 1 tasks" in said


def test_a_task_that_never_reports_a_level_is_given_up_on_at_the_deadline(
    ecs: tuple[Any, Stubber], tmp_path: Path
) -> None:
    client, stubber = ecs
    store = DirectoryStore(tmp_path / "run")
    _one_ready_task(stubber, store)  # ready, then silent: no failure, no result, ECS says RUNNING
    hasty = Timing(
        poll_s=0.01,
        describe_every_s=3600,
        ready_timeout_s=30,
        start_delay_s=0.05,
        task_poll_s=0.2,
        relist_after_s=0.01,
        collect_grace_s=0.1,
    )

    def level(conversation: Any) -> None:
        run_schedule_in_vpc(conversation, fixed([Level(0, concurrency=1, requests=1)]), _Sink(), 0.1)

    with pytest.raises(InVpcError, match=r"level 0: only 0 of 1 tasks wrote their results within"):
        _session(client, store, 1, hasty).run(level)
    assert get_json(store, STOP) == {"kind": "stop"}
