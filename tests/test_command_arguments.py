"""Every command's options, fuzzed (tests/fuzz/arguments.py reads them from the parsers, so an option added
later is fuzzed too): each command line ends in exit 2 with one printable line naming an option and the
fix, or parses and passes the command's own checks. Nothing runs beyond that point: no request, no AWS call."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sonic_deploy import cli
from sonic_deploy.changes import cli as changes_cli
from tests.cdk_context import ROOT
from tests.fuzz import examples
from tests.fuzz.arguments import CORRUPT_SUMMARIES, command_lines, hostile_paths, subparser

CONFIG = str(ROOT / "config")
Parse = Callable[[Sequence[str]], argparse.Namespace]
# Built once: the parsers hold no state between parses, and building them is most of a parse's time.
SONIC_PARSER, CHANGES_PARSER = cli.build_parser(), changes_cli.build_parser()


def _sonic_parse(argv: Sequence[str]) -> argparse.Namespace:
    return cli.checked(SONIC_PARSER.parse_args(argv))


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    made = tmp_path_factory.mktemp("arguments")
    hostile_paths(made)
    (made / "licence.lic").write_bytes(b"licence")
    (made / "cdk.log").write_text("some CDK output\n")
    (made / "run").mkdir()
    (made / "run" / "summary.json").write_bytes(CORRUPT_SUMMARIES["valid"])
    (made / "policy.json").write_text(json.dumps({"Version": "2012-10-17", "Statement": []}))
    hostile_paths(made / "hostile")
    return made


def _sonic(folder: Path) -> dict[tuple[str, ...], list[str]]:
    """Each `sonic-deploy` command, and what it needs to be a valid run before any option is fuzzed."""
    out = ["--out", str(folder / "out")]
    return {
        ("plan",): ["--config-dir", CONFIG],
        ("preflight",): ["--env", "dev", "--config-dir", CONFIG],
        ("connect",): ["--env", "dev", "--route", "ecs", "--config-dir", CONFIG],
        ("mirror",): ["--env", "dev-eks", "--config-dir", CONFIG],
        ("licence", "upload"): [
            "--env",
            "dev",
            "--config-dir",
            CONFIG,
            "--file",
            str(folder / "licence.lic"),
        ],
        ("probe", "ws"): ["--url", "ws://127.0.0.1:9/tts/websocket", *out],
        ("probe", "http"): ["--url", "http://127.0.0.1:9/tts/bytes", *out],
        ("probe", "sagemaker"): ["--endpoint", "sonic-dev", *out],
        ("probe", "serve"): [],
        ("probe", "compare"): [str(folder / "run"), str(folder / "run"), "--png", str(folder / "c.png")],
        ("probe", "turn"): [
            *("--route", "ecs", "--tts-url", "ws://127.0.0.1:9/tts/websocket"),
            *("--llm-url", "http://127.0.0.1:9/v1", "--llm-model", "m", *out),
        ],
    }


def _changes(folder: Path) -> dict[tuple[str, ...], list[str]]:
    return {
        ("diff",): ["--env", "dev"],
        ("baseline",): ["--env", "dev", "--baselines", str(folder / "baselines")],
        ("target",): ["--env", "dev"],
        ("environments",): [],
        ("execution-policy",): [
            "--env",
            "dev",
            "--account",
            "123456789012",
            "--document",
            str(folder / "policy.json"),
        ],
        ("explain-cdk-failure",): ["--env", "dev", "--log", str(folder / "cdk.log")],
        ("ci-roles",): ["--env", "dev", "--repository", "acme/sonic-deploy"],
    }


SONIC = [
    ("plan",),
    ("preflight",),
    ("connect",),
    ("mirror",),
    ("licence", "upload"),
    ("probe", "ws"),
    ("probe", "http"),
    ("probe", "sagemaker"),
    ("probe", "serve"),
    ("probe", "compare"),
    ("probe", "turn"),
]
CHANGES = [
    ("diff",),
    ("baseline",),
    ("target",),
    ("environments",),
    ("execution-policy",),
    ("explain-cdk-failure",),
    ("ci-roles",),
]


def _outcome(parse: Parse, argv: list[str], flags: list[str]) -> str:
    """'valid', or 'refused' once the refusal is checked: exit 2, one printable line, an option, a fix."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            parse(argv)
    except SystemExit as stopped:
        said = stderr.getvalue()
        assert stopped.code == 2, (argv, said)
        lines = said.splitlines()
        assert len(lines) == 1, (argv, said)
        (line,) = lines
        assert line.isprintable(), (argv, line)  # a value with a newline or a control character is escaped
        assert "Fix: " in line, (argv, line)
        assert any(flag in line for flag in flags) or "--" in line, (argv, line)
        return "refused"
    return "valid"


def _hostile(folder: Path) -> dict[str, Path]:
    names = ("missing", "empty", "binary", "a directory")
    return {name: folder / "hostile" / name.replace(" ", "-") for name in names} | {
        "unwritable": folder / "hostile" / "empty" / "out"
    }


def _fuzz(
    parse: Parse,
    parser: argparse.ArgumentParser,
    path: tuple[str, ...],
    base: list[str],
    data: st.DataObject,
    folder: Path,
) -> None:
    flags, fuzzed = data.draw(command_lines(subparser(parser, path), _hostile(folder)))
    _outcome(parse, [*path, *base, *fuzzed], flags)


@pytest.mark.parametrize("path", SONIC, ids=" ".join)
@settings(max_examples=examples(40))
@given(data=st.data())
def test_every_sonic_deploy_command_refuses_bad_options_in_one_line(
    path: tuple[str, ...], data: st.DataObject, folder: Path
) -> None:
    _fuzz(_sonic_parse, SONIC_PARSER, path, _sonic(folder)[path], data, folder)


@pytest.mark.parametrize("path", CHANGES, ids=" ".join)
@settings(max_examples=examples(30))
@given(data=st.data())
def test_every_changes_command_refuses_bad_options_in_one_line(
    path: tuple[str, ...], data: st.DataObject, folder: Path
) -> None:
    base = ["--config", CONFIG, *path, *_changes(folder)[path]]
    flags, fuzzed = data.draw(command_lines(subparser(CHANGES_PARSER, path), _hostile(folder)))
    _outcome(CHANGES_PARSER.parse_args, [*base, *fuzzed], flags)


def test_the_generators_see_every_option_of_every_command(folder: Path) -> None:
    """The fuzzing covers what the parsers hold, so an option added later is drawn too."""
    probe_ws = subparser(cli.build_parser(), ["probe", "ws"])
    flags = {action.option_strings[-1] for action in probe_ws._actions if action.option_strings}
    assert {"--rate", "--max-in-flight", "--sample-rate", "--url", "--slo"} <= flags
    for path in SONIC:
        assert _outcome(cli.parse, [*path, *_sonic(folder)[path]], []) == "valid"
    for path in CHANGES:
        assert (
            _outcome(
                changes_cli.build_parser().parse_args,
                ["--config", CONFIG, *path, *_changes(folder)[path]],
                [],
            )
            == "valid"
        )


WS = ["probe", "ws", "--url", "ws://127.0.0.1:9/tts/websocket"]
HTTP = ["probe", "http", "--url", "http://127.0.0.1:9/tts/bytes"]
TURN = ["probe", "turn", "--route", "ecs", "--tts-url", "ws://127.0.0.1:9/tts/websocket"]
TURN += ["--llm-url", "http://127.0.0.1:9/v1", "--llm-model", "m"]
PLAN = ["plan", "--config-dir", CONFIG]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        # What hung, ran away, printed a traceback or was taken as nonsense before.
        (
            [*HTTP, "--max-in-flight", "0"],
            "--max-in-flight '0': out of range. Fix: give requests in flight, from 1",
        ),
        (
            [*HTTP, "--rate", "1e9"],
            "--rate '1e9': out of range. Fix: give requests a second, more than 0 up to 10000",
        ),
        (
            [*HTTP, "--rate", "10000", "--duration", "100000"],
            "--rate 10000 for --duration 100000 s is 1e+09 requests",
        ),
        ([*WS, "--concurrency", "nan"], "--concurrency 'nan': not a whole number"),
        ([*WS, "--concurrency", "0.5"], "--concurrency '0.5': not a whole number"),
        ([*WS, "--concurrency", "100000"], "--concurrency '100000': out of range"),
        ([*WS, "--duration", "inf"], "--duration 'inf': not a finite number"),
        ([*WS, "--timeout", "0"], "--timeout '0': out of range"),
        ([*WS, "--requests", "-1"], "--requests '-1': out of range"),
        ([*WS, "--warmup", "1e3"], "--warmup '1e3': not a whole number"),
        ([*WS, "--error-backoff-ms", "inf"], "--error-backoff-ms 'inf': not a finite number"),
        ([*WS, "--audible-threshold-db", "1e9"], "--audible-threshold-db '1e9': out of range"),
        ([*WS, "--sample-rate", "nan"], "--sample-rate invalid int value: 'nan'"),
        ([*WS, "--workers", "0"], "--workers '0': out of range"),
        ([*WS, "--multiplex", "0"], "--multiplex '0': out of range"),
        (
            [*WS, "--api-key", "k\r\nX-Injected: 1"],
            "the value of --api-key (or $CARTESIA_API_KEY) has a space",
        ),
        (
            ["probe", "ws", "--url", "http://127.0.0.1:9/x"],
            "--url 'http://127.0.0.1:9/x': the scheme must be ws:// or wss://",
        ),
        (["probe", "http", "--url", "http://127.0.0.1:99999/x"], "its host or port cannot be read"),
        (
            ["probe", "sagemaker", "--endpoint", "e", "--endpoint-url", "127.0.0.1:8080"],
            "--endpoint-url '127.0.0.1:8080'",
        ),
        (
            ["probe", "sagemaker", "--endpoint", "my_endpoint"],
            "--endpoint 'my_endpoint': not a SageMaker endpoint name",
        ),
        (
            ["probe", "serve", "--port", "99999"],
            "--port '99999': out of range. Fix: give a TCP port, from 0 to 65535",
        ),
        (["probe", "serve", "--chunk-ms", "-1"], "--chunk-ms '-1': out of range"),
        (["probe", "serve", "--pace", "-1"], "--pace '-1': out of range"),
        (["probe", "serve", "--exit-after", "inf"], "--exit-after 'inf': not a finite number"),
        (["probe", "serve", "--host", "0.0.0.0\n"], "--host '0.0.0.0\\n': not a host name or IP address"),
        ([*TURN, "--rate", "inf"], "--rate 'inf': not a finite number"),
        ([*TURN, "--stt-url", "ws://127.0.0.1:abc/x"], "--stt-url 'ws://127.0.0.1:abc/x': not a URL"),
        ([*TURN, "--stt-url", "ws://"], "--stt-url 'ws://': no host"),
        ([*PLAN, "--peak-hours", "nan"], "--peak-hours 'nan': not a finite number"),
        ([*PLAN, "--utterance-seconds", "inf"], "--utterance-seconds 'inf': not a finite number"),
        ([*PLAN, "--ttfa-budget-ms", "nan"], "--ttfa-budget-ms 'nan': not a finite number"),
        ([*PLAN, "--peak-calls", "1e9"], "--peak-calls '1e9': not a whole number"),
        (
            [*PLAN, "--peak-hours", "20", "--offpeak-hours", "10"],
            "sonic-deploy plan: --peak-hours/--offpeak-hours (20.0, 10.0): out of range",
        ),
        ([*PLAN, "--probe-instance-type", "g6e.xlarge"], "--probe-instance-type without --probe"),
        (
            [*PLAN, "--instance-types", "g6e.xlarge\n"],
            "--instance-types 'g6e.xlarge\\n': not an instance type",
        ),
        (["preflight", "--env", ""], "--env '': not an environment name"),
        # One Region rule (config/regions.py check_region): the name's pattern and a Region AWS has.
        ([*PLAN, "--region", "zz-fake-1"], "--region 'zz-fake-1': not a Region AWS has"),
        (["probe", "sagemaker", "--endpoint", "e", "--region", "zz-fake-1"], "not a Region AWS has"),
        ([*TURN, "--transcribe-region", "zz-fake-1"], "--transcribe-region 'zz-fake-1': not a Region AWS"),
        ([*TURN, "--bedrock-region", "zz-fake-1"], "--bedrock-region 'zz-fake-1': not a Region AWS has"),
        ([*TURN, "--region", "zz-fake-1"], "--region 'zz-fake-1': not a Region AWS has"),
        ([*WS, "--voice-id", ""], "--voice-id '': not an identifier"),
        ([*HTTP, "--model-id", ""], "--model-id '': not an identifier"),
        (
            ["connect", "--env", "dev", "--route", "ecs", "--config-dir", "/nonexistent"],
            "--config-dir '/nonexistent': no such folder",
        ),
    ],
)
def test_each_rule_is_one_line_naming_the_option(argv: list[str], says: str) -> None:
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), pytest.raises(SystemExit) as stopped:
        cli.parse(argv)
    assert stopped.value.code == 2
    (line,) = stderr.getvalue().splitlines()
    assert says in line and "Fix: " in line and line.isprintable(), line


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["diff", "--env", "dev", "--markdown", "/"], "--markdown '/': no file name"),
        (["execution-policy", "--env", "dev", "--account", "123456789012\n"], "--account '123456789012\\n'"),
        (["explain-cdk-failure", "--env", "dev", "--log", "/"], "--log '/': a directory, not a file"),
        (["target", "--env", "dev\n"], "ENV=dev\\n is not an environment"),
    ],
)
def test_changes_rules_are_one_line(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = changes_cli.main(["--config", CONFIG, *argv])
    except SystemExit as stopped:
        code = int(stopped.code or 0)
    assert code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert says in line and line.isprintable(), line


def test_changes_refuses_a_folder_that_is_not_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        changes_cli.main(["--config", str(tmp_path), "environments"])
    assert stopped.value.code == 2
    assert "no environments/ folder in it" in capsys.readouterr().err


def test_serve_on_a_port_in_use_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        with pytest.raises(SystemExit) as stopped:
            cli.main(["probe", "serve", "--port", port, "--exit-after", "5"])
    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"cannot serve on --host '127.0.0.1' --port {port}: " in line and "Fix: another --port" in line


def test_a_key_from_the_environment_is_checked_and_never_shown(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CARTESIA_API_KEY", "sk_secret_123 \n")
    with pytest.raises(SystemExit) as stopped:
        cli.parse(WS)
    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "the value of --api-key (or $CARTESIA_API_KEY) has a space" in line, line
    assert "sk_secret" not in line and "2025-04-16" not in line
    monkeypatch.setenv("CARTESIA_API_KEY", "sk_good")
    assert cli.parse(WS).api_key == "sk_good"
    monkeypatch.delenv("CARTESIA_API_KEY")
    assert cli.parse(WS).api_key == ""


def test_a_typed_key_is_never_shown(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.parse([*WS, "--api-key", "sk_typed_456\t"])
    assert "sk_typed" not in capsys.readouterr().err


def test_a_pipe_or_a_device_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A FIFO blocked the parse until a writer came (a hang); /dev/zero was read to 64 MiB."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for special in (str(fifo), "/dev/zero"):
        argv = [*PLAN, "--probe", special, "--probe-instance-type", "g6.xlarge"]
        done = subprocess.run(
            [sys.executable, "-m", "sonic_deploy.cli", *argv],
            capture_output=True,
            text=True,
            timeout=120,  # bounded: before the fix the FIFO never returned
            check=False,
        )
        assert done.returncode == 2, done.stderr
        (line,) = done.stderr.splitlines()
        assert f"--probe '{special}': not a regular file" in line and "Fix: " in line


def test_ctrl_c_while_the_arguments_are_checked_is_no_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse's types read files (a summary, transcripts): Ctrl-C can come during the parse."""

    def interrupted(argv: Sequence[str] | None = None) -> argparse.Namespace:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "parse", interrupted)
    assert cli.main(PLAN) == 130
    assert capsys.readouterr().err == "sonic-deploy: interrupted\n"
