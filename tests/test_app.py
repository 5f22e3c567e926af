"""The app as the CDK CLI runs it: same template as the tests see, one clear error for bad config, and
nothing half-written: a failed or interrupted synth leaves no assembly, a good one is stamped."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from aws_cdk import App
from aws_cdk.assertions import Template

from sonic_deploy.changes.assembly import STAGING_PREFIX, Digests, check_assembly, is_assembly_file
from sonic_deploy.changes.staged_synth import StagedSynth, SynthResult
from sonic_deploy.changes.templates import TemplateError
from sonic_deploy.config import load_settings
from tests.cdk_context import ROOT, cli_context
from tests.conftest import CONFIG_DIR, EditConfig

CDK = [str(ROOT / "node_modules" / "aws-cdk" / "bin" / "cdk")]
# What the CLI, and the app after it, must never leave behind: an assembly, a staging folder, a lock.
LEFT_BEHIND = ("manifest.json", "SonicSageMaker.template.json", "SonicEcs.template.json", "sonic-synth.json")


def _cdk(*args: str) -> subprocess.CompletedProcess[str]:
    # The CLI as a user runs it: with CDK's template checks, which the rest of the suite skips (tests/__init__.py).
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "CDK_VALIDATION"}
    env.update(
        CDK_DISABLE_VERSION_CHECK="1", CDK_DISABLE_CLI_TELEMETRY="true", AWS_EC2_METADATA_DISABLED="true"
    )
    return subprocess.run(
        ["node", *CDK, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _earlier_synth(out: Path) -> Path:
    """An output folder as a successful synth left it, plus a file of the user's that must stay."""
    out.mkdir(parents=True, exist_ok=True)
    for name in LEFT_BEHIND:
        (out / name).write_text("{}", encoding="utf-8")
    (out / "asset.0123").mkdir()
    (out / "keep.txt").write_text("not the CDK's", encoding="utf-8")
    return out


def _left(out: Path) -> list[str]:
    return sorted(
        p.name
        for p in out.iterdir()
        if is_assembly_file(p) or p.name.startswith(STAGING_PREFIX) or p.suffix == ".lock"
    )


def _app(out: Path, **context: str) -> subprocess.Popen[str]:
    """app.py as the CLI runs it (CDK_OUTDIR, CDK_CONTEXT_JSON), without the CLI: seconds, not half a minute."""
    env = os.environ | {"CDK_OUTDIR": str(out), "CDK_CONTEXT_JSON": json.dumps(cli_context(**context))}
    return subprocess.Popen(
        [sys.executable, "app.py"],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def test_cli_synth_matches_the_tests_template(tmp_path: Path, sagemaker_template: Template) -> None:
    result = _cdk("synth", "--quiet", "--no-notices", "--output", str(tmp_path))
    assert result.returncode == 0, result.stderr
    from_cli = json.loads((tmp_path / "SonicSageMaker.template.json").read_text())
    assert from_cli == sagemaker_template.to_json()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    conclusions = {plugin["pluginName"]: plugin["conclusion"] for plugin in report["pluginReports"]}
    # CDK reports a clean plugin only when something was suppressed (W3010 is, in both stacks today).
    assert conclusions.get("CloudFormation Validate", "success") == "success"
    # Published whole and stamped: the change classifier takes it; no staging folder, no lock left.
    assert check_assembly(tmp_path, environment="dev", config_dir=CONFIG_DIR) == [
        "SonicEcs",
        "SonicSageMaker",
    ]
    assert [
        p.name for p in tmp_path.iterdir() if p.name.startswith(STAGING_PREFIX) or p.suffix == ".lock"
    ] == []


def test_cli_synth_with_unknown_environment_prints_one_error(tmp_path: Path) -> None:
    out = _earlier_synth(tmp_path / "out")
    result = _cdk("synth", "--quiet", "--no-notices", "-c", "env=nope", "--output", str(out))
    # The CLI exits 1 for any failed app and adds `...: Subprocess exited with error 2` (`make synth`,
    # through sonic_deploy/changes/synth.py, shows only the app's line and exits 2).
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    app_line, cli_line = result.stderr.strip().splitlines()
    assert app_line.startswith(
        f"sonic-deploy: {ROOT}/config/environments: env = 'nope': unknown environment. Fix: use one of dev, dev-eks, prod"
    )
    assert cli_line.endswith(": Subprocess exited with error 2")
    assert _left(out) == []  # the earlier synth's assembly is gone, not left looking valid
    assert (out / "keep.txt").is_file()


@pytest.mark.parametrize(
    ("file", "old", "new", "context"),
    [
        ("environments/dev.toml", "", "", {"env": "nope"}),
        ("environments/dev.toml", 'region = "us-east-2"', 'region = "us-east-2\\n"', {}),
        ("environments/dev.toml", "", "[broken\n", {}),
        ("environments/prod.toml", 'project = "sonic-deploy"', 'project = ""', {"env": "prod"}),
    ],
    ids=["unknown-env", "region-with-newline", "not-toml", "empty-tag-value"],
)
def test_a_config_error_leaves_no_assembly(
    tmp_path: Path, edit_config: EditConfig, file: str, old: str, new: str, context: dict[str, str]
) -> None:
    config = edit_config(file, old, new) if new else edit_config(file, "", "")
    out = _earlier_synth(tmp_path / "out")
    app = _app(out, config=str(config), **context)
    _, stderr = app.communicate(timeout=120)
    assert app.returncode == 2
    [line] = stderr.splitlines()
    assert line.startswith(f"sonic-deploy: {config}/") and "Fix: " in line
    assert _left(out) == []
    assert (out / "keep.txt").is_file()


def test_a_failure_that_is_not_the_users_leaves_no_assembly_either(tmp_path: Path) -> None:
    """Without cdk.json's feature flags a construct's own check fails halfway through building the stacks."""
    out = _earlier_synth(tmp_path / "out")
    env = os.environ | {"CDK_OUTDIR": str(out), "CDK_CONTEXT_JSON": "{}"}
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1 and "AssertionError" in result.stderr
    assert _left(out) == []


@pytest.mark.parametrize(
    ("stop", "to_group"), [(signal.SIGINT, True), (signal.SIGTERM, False)], ids=["ctrl-c", "sigterm"]
)
def test_ctrl_c_during_synth_prints_no_traceback_and_leaves_nothing(
    tmp_path: Path, stop: signal.Signals, to_group: bool
) -> None:
    """SIGINT to the process group (a terminal's Ctrl-C reaches the app and its jsii kernel), or SIGTERM to
    the app alone (a CI cancel, `kill`), once the app has started staging, i.e. while it builds the stacks
    (which takes seconds)."""
    out = _earlier_synth(tmp_path / "out")
    app = _app(out)
    try:
        for _ in range(2400):  # up to 2 minutes on a busy machine: a hang fails, it does not wait forever
            if any(p.name.startswith(STAGING_PREFIX) for p in out.iterdir()) or app.poll() is not None:
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                app.wait(timeout=0.05)
        assert app.poll() is None, app.stderr.read() if app.stderr else ""
        if to_group:
            os.killpg(app.pid, stop)
        else:
            app.send_signal(stop)
        _, stderr = app.communicate(timeout=120)
    finally:
        if app.poll() is None:
            os.killpg(app.pid, signal.SIGKILL)
            app.wait()
    assert app.returncode == 128 + stop
    assert "Traceback" not in stderr
    assert stderr.splitlines()[-1] == "sonic-deploy: synth interrupted; no assembly was written"
    assert _left(out) == []


def test_a_config_saved_during_synth_leaves_a_stale_assembly(
    tmp_path: Path, edit_config: EditConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stamp's digest is the config the synth read: saved after it was read, the assembly is stale."""
    import app as cdk_app

    config = edit_config("environments/dev.toml", "", "")
    real_load = load_settings

    def load_then_save(config_dir: Path, env: str | None) -> object:
        settings = real_load(config_dir, env)
        with (config / "environments" / "dev.toml").open("a", encoding="utf-8") as toml:
            toml.write("\n# saved while the synth ran\n")
        return settings

    monkeypatch.setattr(cdk_app, "load_settings", load_then_save)
    monkeypatch.setattr(cdk_app, "add_stacks", lambda *_args, **_kwargs: {})  # the stamp is what is tested
    # The context goes in as the CLI's would (the jsii kernel does not see a changed os.environ).
    monkeypatch.setattr(cdk_app, "App", lambda **props: App(context={"config": str(config)}, **props))
    out = tmp_path / "out"
    assert StagedSynth(out, cdk_app.synthesize).run() == 0
    with pytest.raises(TemplateError, match="was synthesized from another config"):
        check_assembly(out, environment="dev", config_dir=config)


def test_a_synth_with_validation_errors_is_published_but_never_stamped(tmp_path: Path) -> None:
    """Plain `cdk synth`: the CDK CLI fails on the validation report after the app exits 0, so the app
    leaves the report for it to show but stamps nothing: check-assembly and `make diff` refuse the folder."""
    report = {
        "pluginReports": [
            {"conclusion": "failure", "violations": [{"ruleName": "F3033", "description": "x"}]}
        ]
    }

    def synthesize(staged: Path | None) -> SynthResult:
        assert staged is not None
        (staged / "manifest.json").write_text("{}", encoding="utf-8")
        (staged / "SonicSageMaker.template.json").write_text("{}", encoding="utf-8")
        (staged / "validation-report.json").write_text(json.dumps(report), encoding="utf-8")
        return "dev", CONFIG_DIR, ["SonicSageMaker"], Digests.of(CONFIG_DIR)

    out = tmp_path / "out"
    assert StagedSynth(out, synthesize).run() == 0
    assert (out / "validation-report.json").is_file() and not (out / "sonic-synth.json").exists()
    with pytest.raises(TemplateError, match="holds no finished synth"):
        check_assembly(out, environment="dev", config_dir=CONFIG_DIR)


# What only the test, probe and framework extras install: `make synth` installs the `cdk` extra alone, so a
# synth, or `make deploy`'s preflight and `make licence`, that loaded one of these would fail on a fresh
# machine (docs/architecture.md, "Import rules").
NOT_IN_A_SYNTH_INSTALL = (
    "aiohttp",
    "cartesia",
    "hdrh",
    "hypothesis",
    "livekit",
    "matplotlib",
    "moto",
    "orjson",
    "pipecat",
    "pybase64",
    "websockets",
)
# The make targets' own command lines (mk/deploy.mk: deploy, licence), checked as they run.
DEPLOY_COMMANDS = (
    ["preflight", "--env", "dev", "--config-dir", "config", "--before-deploy", "ecs"],
    ["licence", "upload", "--env", "dev", "--file", "pyproject.toml", "--config-dir", "config"],
)


def test_a_synth_and_the_deploy_commands_load_only_what_make_synth_installs() -> None:
    """In a fresh interpreter where those packages cannot be imported (as after `make synth`): app.py and every
    module of the packages a stack is built from import none of them, and the commands `make deploy` and
    `make licence` run parse, with every module their runs load."""
    code = f"""
import importlib, importlib.abc, json, pkgutil, sys
tried = []
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {NOT_IN_A_SYNTH_INSTALL!r}:
            tried.append(name)
            raise ImportError(f"not installed by make synth: {{name}}")
        return None
sys.meta_path.insert(0, Absent())
def walk(*packages):
    for package in packages:
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)
import app, sonic_deploy.constructs, sonic_deploy.routes, sonic_deploy.stacks
walk(sonic_deploy.constructs, sonic_deploy.routes, sonic_deploy.stacks)
synth_tried = sorted(tried)
import sonic_deploy.changes, sonic_deploy.cli, sonic_deploy.licence, sonic_deploy.preflight
for argv in {DEPLOY_COMMANDS!r}:
    sonic_deploy.cli.parse(argv)
walk(sonic_deploy.changes, sonic_deploy.licence, sonic_deploy.preflight)
print(json.dumps(synth_tried))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1]) == []
