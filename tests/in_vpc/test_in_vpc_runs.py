"""`probe ... --in-vpc ENV` end to end on this machine: the real runner, real tasks (`sonic-deploy` processes,
as the image's ENTRYPOINT runs them) against the reference server, the run's bucket a folder. The merged
summary is exact (the percentiles of one histogram of all the samples) and the load really was split."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sonic_deploy.cli import main, parse
from sonic_deploy.probe.level import Level
from sonic_deploy.probe.stats import LevelStats
from tests.conftest import EditConfig
from tests.standins.harness import ServerFactory
from tests.turn.test_command import STANDINS

from .conftest import CONFIG, ROOT, LocalAws
from .fakes import task_arn

FAST_SERVER = (
    "--first-byte-ms",
    "20",
    "--jitter-ms",
    "15",
    "--chunk-ms",
    "20",
    "--pace",
    "0.2",
    "--ms-per-char",
    "1",
)


TURN_HOPS_LINE = '# turn_hops = ["transcribe", "bedrock"]'


@pytest.fixture
def hops_config(edit_config: EditConfig) -> str:
    """config/ with dev's `[probe] turn_hops = ["transcribe", "bedrock"]`: --stt transcribe and --llm bedrock
    are the task's to call."""
    return str(edit_config("environments/dev.toml", TURN_HOPS_LINE, TURN_HOPS_LINE.removeprefix("# ")))


def _summary(out: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    summary = json.loads((out / "summary.json").read_text())
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    return summary, samples


def test_a_sweep_on_three_tasks_merges_exactly_and_splits_the_load(
    reference_server: ServerFactory, local_aws: Callable[..., LocalAws], tmp_path: Path
) -> None:
    server = reference_server(*FAST_SERVER)
    aws = local_aws("ecs", ApiUrl=server.ws_url)
    out = tmp_path / "out"
    argv = ["probe", "ws", "--in-vpc", "dev", "--config-dir", CONFIG, "--tasks", "3", "--concurrency", "2,5"]
    argv += ["--requests", "13", "--warmup", "1", "--out", str(out), "--quiet", "--no-report"]
    assert main(argv) == 0

    summary, samples = _summary(out)
    assert summary["target"]["url"] == server.ws_url  # the stack's ApiUrl
    (run,) = aws.runs()
    in_vpc = dict(summary["target"]["in_vpc"])
    commands = in_vpc.pop("commands")
    assert in_vpc == {
        "environment": "dev",
        "stack": "sonic-dev-ecs",
        "region": "us-east-2",
        "tasks": 3,
        "run_id": run.name,
        "objects": run.as_uri(),
    }
    # Each task's facts of each level: its measured requests (all 13 of a level), its start and end.
    assert [c["what"] for c in commands] == ["level 0", "level 1"]
    for command in commands:
        assert [t["task"] for t in command["tasks"]] == [0, 1, 2]
        assert sum(t["requests"] for t in command["tasks"]) == 13
        for facts in command["tasks"]:
            assert facts["late_s"] >= 0 and facts["ended_at"] >= facts["started_at"]
    assert [level["concurrency"] for level in summary["levels"]] == [2, 5]
    for index, concurrency in enumerate((2, 5)):
        measured = [s for s in samples if s["level"] == index and not s["warmup"]]
        level = summary["levels"][index]
        assert level["requests"] == level["ok"] == len(measured) == 13
        # One histogram of every sample, as a single run over all of them would hold.
        whole = LevelStats()
        for sample in measured:
            whole.add(sample)
        for measure in ("ttfa_ms", "total_ms", "connect_ms", "max_gap_ms"):
            assert level[measure] == whole.percentiles(measure), measure
        # Each task ran its share of the level, as Level.share splits it, and said which it was.
        shares = {
            i: Level(index, concurrency=concurrency, requests=13, warmup=1).share(i, 3) for i in range(3)
        }
        assert Counter(s["task"] for s in measured) == {
            i: share.requests for i, share in shares.items() if share.requests
        }
        assert all(s["task"] == s["worker"] for s in samples)

    # The tasks' commands: the probe's own options, the stack's defaults, the hidden task options; nothing local.
    for index, command in enumerate(aws.ecs.commands):
        assert command[:2] == ["probe", "ws"]
        for local in ("--in-vpc", "--out", "--config-dir", "--tasks", "--api-key"):
            assert local not in command
        assert command[command.index("--url") + 1] == server.ws_url
        assert command[command.index("--model-id") + 1] == "sonic-3"
        assert command[command.index("--task-index") + 1] == str(index)
        assert command[command.index("--task-count") + 1] == "3"
    call = aws.ecs.calls[0]
    assert call["launchType"] == "FARGATE" and call["count"] == 1
    assert call["networkConfiguration"]["awsvpcConfiguration"] == {
        "subnets": ["subnet-0a1b2c3d4e5f60718", "subnet-0f1e2d3c4b5a69788"],
        "securityGroups": ["sg-0123456789abcdef0"],
        "assignPublicIp": "DISABLED",
    }
    # Every task stopped once done, and the run's objects kept.
    assert aws.ecs.stopped == [task_arn(i) for i in range(3)]
    assert (run / "commands" / "2.json").exists()  # two levels, then done
    assert json.loads((run / "commands" / "2.json").read_text()) == {"kind": "done"}


def test_an_open_loop_shares_the_rate_and_transcripts_travel_through_the_bucket(
    reference_server: ServerFactory, local_aws: Callable[..., LocalAws], tmp_path: Path
) -> None:
    server = reference_server(*FAST_SERVER)
    aws = local_aws("ecs", ApiUrl=server.ws_url)
    transcripts = tmp_path / "lines.txt"
    transcripts.write_text("One line.\nAnother line, a bit longer.\n")
    out = tmp_path / "out"
    argv = ["probe", "ws", "--in-vpc", "dev", "--config-dir", CONFIG, "--tasks", "2", "--rate", "20"]
    argv += [
        "--duration",
        "1",
        "--transcripts",
        str(transcripts),
        "--out",
        str(out),
        "--quiet",
        "--no-report",
    ]
    assert main(argv) == 0
    summary, samples = _summary(out)
    (level,) = summary["levels"]
    measured = [s for s in samples if not s["warmup"]]
    assert level["requests"] == len(measured) and level["ok"] == len(measured) > 0
    assert {s["task"] for s in measured} == {0, 1}
    assert {s["rate"] for s in measured} == {20.0}
    whole = LevelStats()
    for sample in measured:
        whole.add(sample)
    assert level["ttfa_ms"] == whole.percentiles("ttfa_ms")
    # A file of this machine's is not on the command line: the tasks read it from the run's objects.
    assert all("--transcripts" not in command for command in aws.ecs.commands)
    (run,) = aws.runs()
    assert (run / "transcripts.txt").read_text() == "One line.\nAnother line, a bit longer.\n"


def test_turn_runs_its_calls_on_the_tasks_and_summarizes_them_here(
    reference_server: ServerFactory, local_aws: Callable[..., LocalAws], tmp_path: Path
) -> None:
    server = reference_server(*STANDINS)
    aws = local_aws("ecs", ApiUrl=server.ws_url)
    ws = server.base.replace("http://", "ws://")
    out = tmp_path / "turn"
    argv = ["probe", "turn", "--in-vpc", "dev", "--config-dir", CONFIG, "--tasks", "2", "--route", "ecs"]
    argv += [
        "--llm-model",
        "stand-in",
        "--llm-url",
        f"{server.base}/v1",
        "--stt-url",
        ws,
        "--concurrency",
        "3",
    ]
    argv += ["--turns", "2", "--warmup-turns", "0", "--gap-ms", "0", "--ramp-up", "0.1", "--out", str(out)]
    argv += ["--quiet", "--no-plot", "--budget", str(ROOT / "config/turn_budget.toml")]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    lines = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert summary["turns"] == summary["ok"] == len(lines) == 3 * 2  # 3 calls of 2 turns
    assert Counter(line["task"] for line in lines) == {0: 4, 1: 2}  # 2 calls and 1 call
    assert summary["turn_ms"]["p95"] is not None
    assert summary["in_vpc"]["tasks"] == 2
    for command in aws.ecs.commands:
        assert command[command.index("--tts-url") + 1] == server.ws_url
        assert "--budget" not in command  # judged here, on all the turns
    assert len(aws.ecs.stopped) == 2


def test_http_and_sagemaker_default_to_the_stacks_outputs(
    reference_server: ServerFactory, local_aws: Callable[..., LocalAws], tmp_path: Path
) -> None:
    server = reference_server(*FAST_SERVER)
    common = [
        "--in-vpc",
        "dev",
        "--config-dir",
        CONFIG,
        "--tasks",
        "2",
        "--concurrency",
        "2",
        "--requests",
        "4",
    ]
    common += ["--warmup", "0", "--quiet", "--no-report"]
    aws = local_aws("ecs", ApiUrl=server.ws_url)
    assert main(["probe", "http", *common, "--out", str(tmp_path / "http")]) == 0
    summary, _ = _summary(tmp_path / "http")
    assert summary["target"]["url"] == server.http_url  # ApiUrl's host, /tts/bytes
    assert summary["levels"][0]["ok"] == 4
    assert {command[command.index("--url") + 1] for command in aws.ecs.commands} == {server.http_url}

    aws = local_aws("sagemaker")
    argv = ["probe", "sagemaker", *common, "--endpoint-url", server.base, "--out", str(tmp_path / "sm")]
    assert main(argv) == 0
    summary, _ = _summary(tmp_path / "sm")
    assert (summary["target"]["endpoint"], summary["target"]["region"]) == ("sonic-dev", "us-east-2")
    assert summary["levels"][0]["ok"] == 4
    for command in aws.ecs.commands:
        assert command[command.index("--endpoint") + 1] == "sonic-dev"
        assert command[command.index("--endpoint-url") + 1] == server.base  # given, so kept


def test_the_slo_search_runs_on_the_tasks_started_once(
    reference_server: ServerFactory, local_aws: Callable[..., LocalAws], tmp_path: Path
) -> None:
    server = reference_server("--capacity", "2", "--first-byte-ms", "20", "--audio-ms", "100")
    aws = local_aws("ecs", ApiUrl=server.ws_url)
    out = tmp_path / "slo"
    argv = ["probe", "ws", "--in-vpc", "dev", "--config-dir", CONFIG, "--slo", "errors<=0", "--slo-max", "64"]
    argv += ["--requests", "12", "--error-backoff-ms", "20", "--out", str(out), "--quiet", "--no-report"]
    assert main(argv) == 0
    summary, samples = _summary(out)
    slo = summary["slo"]
    # Up to the server's capacity nothing can be refused; above it, whether two tasks' streams overlap is
    # the machine's timing: each level's verdict is checked against what the server itself refused.
    tried = [(t["concurrency"], t["passed"]) for t in slo["tried"]]
    assert tried[:2] == [(1, True), (2, True)]
    refused = Counter(s["concurrency"] for s in samples if not s["ok"])
    assert sum(refused.values()) == server.stats().get("over_capacity", 0)
    for concurrency, passed in tried:
        measured_refusals = sum(
            1 for s in samples if s["concurrency"] == concurrency and not s["ok"] and not s["warmup"]
        )
        assert passed == (measured_refusals == 0), concurrency
    assert slo["max_concurrency"] is not None and slo["max_concurrency"] >= 2
    assert len(aws.ecs.processes) == 2  # --slo-max 64 at 32 streams a task, for all four levels
    assert {s["task"] for s in samples if s["concurrency"] == 2} == {0, 1}


def test_a_search_to_the_default_slo_max_needs_more_tasks_than_allowed(
    local_aws: Callable[..., LocalAws], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    local_aws("ecs")
    argv = [
        "probe",
        "ws",
        "--in-vpc",
        "dev",
        "--config-dir",
        CONFIG,
        "--slo",
        "errors<=0",
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(argv) == 2
    assert (
        "--slo up to --slo-max 1024 needs 32 tasks, more than probe.max_tasks = 20" in capsys.readouterr().err
    )


def test_publish_metrics_in_the_vpc_goes_to_the_profile_in_the_stacks_region(
    reference_server: ServerFactory,
    local_aws: Callable[..., LocalAws],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--in-vpc prod --profile prod --publish-metrics: the run's own account and the stack's Region, not
    the default profile's (whatever AWS_DEFAULT_REGION says)."""
    import boto3
    from botocore.stub import Stubber

    from sonic_deploy.probe import publish_metrics

    server = reference_server(*FAST_SERVER)
    local_aws("ecs", ApiUrl=server.ws_url, Region="us-east-2")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-2")
    stubber = Stubber(cloudwatch)
    stubber.add_response("put_metric_data", {})
    stubber.activate()
    made: list[tuple[str | None, str | None]] = []

    def client(profile: str | None, region: str | None) -> object:
        made.append((profile, region))
        return cloudwatch

    monkeypatch.setattr(publish_metrics, "cloudwatch_client", client)
    argv = ["probe", "ws", "--in-vpc", "dev", "--config-dir", CONFIG, "--profile", "prod", "--tasks", "1"]
    argv += ["--concurrency", "1", "--requests", "2", "--warmup", "0", "--quiet", "--no-report"]
    argv += ["--out", str(tmp_path / "out"), "--publish-metrics", "dev"]
    assert main(argv) == 0
    assert made == [("prod", "us-east-2")]
    stubber.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("hops", "said"),
    [
        (["--llm-url", "http://10.0.0.5/v1"], "--in-vpc with --stt ink on api.cartesia.ai"),
        (
            ["--stt-url", "ws://10.0.0.5", "--llm-url", "https://api.openai.com/v1"],
            "--in-vpc with --llm openai on api.openai.com: a task has no OPENAI_API_KEY",
        ),
    ],
)
def test_turn_in_the_vpc_refuses_hops_a_task_has_no_key_for(
    hops: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["probe", "turn", "--in-vpc", "dev", "--config-dir", CONFIG, "--route", "ecs", "--llm-model", "m"]
    with pytest.raises(SystemExit) as stopped:
        main([*argv, *hops])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert said in err and "Fix: use --stt transcribe --llm bedrock" in err


@pytest.mark.parametrize(("stop", "code"), [(KeyboardInterrupt(), 130), ("SIGTERM", 143), ("SIGHUP", 129)])
def test_turn_in_the_vpc_interrupted_exits_as_a_probe_does(
    stop: object,
    code: int,
    hops_config: str,
    local_aws: Callable[..., LocalAws],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import signal

    from sonic_deploy.in_vpc import session
    from sonic_deploy.in_vpc.runner import Terminated

    local_aws("ecs")
    raised = stop if isinstance(stop, BaseException) else Terminated(getattr(signal, str(stop)))

    def interrupted(self: object, work: object) -> None:
        raise raised

    monkeypatch.setattr(session.Session, "run", interrupted)
    argv = ["probe", "turn", "--in-vpc", "dev", "--config-dir", hops_config, "--tasks", "1", "--route", "ecs"]
    argv += ["--stt", "transcribe", "--llm", "bedrock", "--llm-model", "m", "--out", str(tmp_path / "t")]
    argv += ["--quiet", "--no-plot", "--budget", str(ROOT / "config/turn_budget.toml")]
    assert main(argv) == code
    assert "interrupted: the turns finished so far are in" in capsys.readouterr().err


def test_turn_open_loop_tasks_follow_the_calls_at_once_not_the_rate(
    hops_config: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--rate 5 calls a second of 3 turns is ~100 calls at once: sized by streams_per_task (32), not by
    rate_per_task (20 TTS requests a second, which would say 1 task); and 40/s is more than max_tasks."""
    from sonic_deploy.in_vpc import session

    monkeypatch.setattr(session, "aws_clients", lambda *a: pytest.fail("called AWS"))
    argv = [
        "probe",
        "turn",
        "--in-vpc",
        "dev",
        "--config-dir",
        hops_config,
        "--route",
        "ecs",
        "--stt",
        "transcribe",
    ]
    argv += ["--llm", "bedrock", "--llm-model", "m", "--rate", "40", "--duration", "10"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--rate 40 calls/s x ~" in err and "calls at once) needs" in err and "max_tasks = 20" in err


def test_a_turn_task_uploads_its_turns_as_they_finish_for_an_interrupted_run(
    reference_server: ServerFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn task's watcher uploads the turns finished so far while the calls run (a part at every poll
    here), so that a runner interrupted mid-turn (Ctrl-C) finds them in `InVpcRun.partial`; stop.json then
    ends the calls, and the task uploads the whole."""
    import threading
    import time

    from sonic_deploy.in_vpc import task
    from sonic_deploy.in_vpc.protocol import (
        RUN,
        STOP,
        DirectoryStore,
        RunManifest,
        get_json,
        put_json,
        ready_key,
        samples_key,
        stats_key,
        turn_command,
    )
    from sonic_deploy.in_vpc.runner import InVpcRun, Timing

    server = reference_server(*STANDINS)
    ws = server.base.replace("http://", "ws://")
    store = DirectoryStore(tmp_path / "run")
    monkeypatch.setattr(task, "PART_EVERY_S", 0.0)
    monkeypatch.setenv("CARTESIA_API_KEY", "from-secrets-manager")
    put_json(store, RUN, RunManifest("r", 1, poll_s=0.2, idle_timeout_s=120).as_json())
    seen: list[str] = []

    def runner() -> None:  # the runner's side: the turn command, then stop.json once a part is up
        deadline = time.monotonic() + 120  # a bail-out only: the task is stopped either way
        while get_json(store, ready_key(0)) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        put_json(store, "commands/0.json", turn_command(time.time()))
        while not seen and time.monotonic() < deadline:
            seen.extend(key for key in store.list("results/0/0/part-") if store.get(key))
            time.sleep(0.05)
        put_json(store, STOP, {"kind": "stop"})

    thread = threading.Thread(target=runner, daemon=True)
    thread.start()
    argv = ["probe", "turn", "--route", "ecs", "--tts-url", f"{ws}/tts/websocket", "--stt-url", ws]
    argv += ["--llm-url", f"{server.base}/v1", "--llm-model", "stand-in", "--concurrency", "1"]
    argv += ["--calls", "1000", "--turns", "2", "--warmup-turns", "0", "--gap-ms", "0", "--ramp-up", "0.1"]
    argv += ["--in-vpc-task", store.where(), "--task-index", "0", "--task-count", "1"]
    assert main(argv) == 0
    thread.join(10)
    assert seen, "no part was uploaded while the turns ran"
    whole = (store.get(samples_key(0, 0)) or b"").decode().splitlines()
    parts = [
        line
        for key in store.list("results/0/0/part-")
        for line in (store.get(key) or b"").decode().splitlines()
    ]
    assert parts and parts == whole[: len(parts)]  # each turn once, in order; the whole has all of them
    assert len(whole) < 1000 * 2  # stop.json ended the calls
    assert all("turn" in json.loads(line) and json.loads(line)["task"] == 0 for line in whole)
    # Interrupted before the task's whole upload: the runner collects the parts.
    (tmp_path / "run" / stats_key(0, 0)).unlink()
    run = InVpcRun(None, store, 1, Timing(), lambda text: None)  # type: ignore[arg-type]
    run.seq = 1
    assert [json.dumps(line) for line in run.partial()] == [json.dumps(json.loads(line)) for line in parts]


@pytest.mark.parametrize(
    ("hops", "granted", "said"),
    [
        (
            ["--stt", "transcribe", "--llm-url", "http://10.0.0.5/v1"],
            None,
            "--in-vpc dev with --stt transcribe: the probe task has no grant for it, nor its VPC an endpoint where "
            "there is no NAT (turn_hops = [] under [probe] in {config}). Fix: turn_hops = "
            '["transcribe"] there, then `make deploy ENV=dev ROUTE=ecs`',
        ),
        (
            ["--stt-url", "ws://10.0.0.5", "--llm", "bedrock"],
            '["transcribe"]',
            "--in-vpc dev with --llm bedrock: the probe task has no grant for it, nor its VPC an endpoint where "
            'there is no NAT (turn_hops = ["transcribe"] under [probe] in {config}). Fix: turn_hops = '
            '["transcribe", "bedrock"] there, then `make deploy ENV=dev ROUTE=ecs`',
        ),
    ],
)
def test_turn_in_the_vpc_refuses_a_cloud_hop_the_environment_does_not_grant(
    hops: list[str],
    granted: str | None,
    said: str,
    edit_config: EditConfig,
    local_aws: Callable[..., LocalAws],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--stt transcribe` and `--llm bedrock` reach their services from a task only when `[probe] turn_hops`
    lists them (the stack's grant and endpoint): refused before any AWS call, naming the line and the deploy."""
    config = edit_config("environments/dev.toml", "", "")
    if granted is not None:
        config = edit_config(
            "environments/dev.toml",
            TURN_HOPS_LINE,
            f"turn_hops = {granted}",
        )
    aws = local_aws("ecs")
    argv = ["probe", "turn", "--in-vpc", "dev", "--config-dir", str(config), "--route", "ecs"]
    with pytest.raises(SystemExit) as stopped:
        main([*argv, "--llm-model", "us.amazon.nova-micro-v1:0", *hops])
    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()  # one line
    assert line == "sonic-deploy probe turn: " + said.format(config=config / "environments" / "dev.toml")
    assert aws.ecs.commands == []  # nothing started


@pytest.mark.parametrize(
    "hops",
    [
        ["--stt", "transcribe", "--llm-url", "http://10.0.0.5/v1"],
        ["--stt-url", "ws://10.0.0.5", "--llm", "bedrock"],
        ["--stt", "transcribe", "--llm", "bedrock"],
    ],
)
def test_turn_in_the_vpc_takes_the_cloud_hops_the_environment_grants(
    hops: list[str], hops_config: str
) -> None:
    """With `turn_hops = ["transcribe", "bedrock"]`, the check lets both through (to the run's set-up)."""
    argv = ["probe", "turn", "--in-vpc", "dev", "--config-dir", hops_config, "--route", "ecs"]
    args = parse([*argv, "--llm-model", "m", *hops])
    assert (args.in_vpc, str(args.config_dir)) == ("dev", hops_config)


def test_turn_in_the_vpc_refuses_a_hop_in_another_region_and_skips_the_grant_for_a_stand_in(
    hops_config: str, edit_config: EditConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    """The grant and the hops' VPC endpoints are the stack's Region's: another Region is refused, naming it;
    a hop given its own endpoint (a stand-in inside the VPC) calls no AWS service, so needs no grant."""
    argv = [
        "probe",
        "turn",
        "--in-vpc",
        "dev",
        "--config-dir",
        hops_config,
        "--route",
        "ecs",
        "--llm-model",
        "m",
    ]
    with pytest.raises(SystemExit) as stopped:
        parse(
            [
                *argv,
                "--stt",
                "transcribe",
                "--transcribe-region",
                "eu-west-1",
                "--llm-url",
                "http://10.0.0.5/v1",
            ]
        )
    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "sonic-deploy probe turn: --in-vpc dev with --transcribe-region eu-west-1: the probe task reaches "
        "transcribe in the stack's Region, us-east-2, only. Fix: drop --transcribe-region (the task's Region is "
        "the stack's)"
    )
    # The stack's own Region is fine; and with no grant at all, a stand-in endpoint is too.
    parse(
        [*argv, "--stt", "transcribe", "--transcribe-region", "us-east-2", "--llm-url", "http://10.0.0.5/v1"]
    )
    ungranted = str(edit_config("environments/dev.toml", "", ""))
    bare = [
        "probe",
        "turn",
        "--in-vpc",
        "dev",
        "--config-dir",
        ungranted,
        "--route",
        "ecs",
        "--llm-model",
        "m",
    ]
    args = parse(
        [*bare, "--stt-url", "ws://10.0.0.5", "--llm", "bedrock", "--bedrock-endpoint-url", "http://10.0.0.6"]
    )
    assert args.bedrock_endpoint_url == "http://10.0.0.6"
