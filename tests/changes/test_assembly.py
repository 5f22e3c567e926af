"""The change classifier reads only an assembly that a successful synth of the current config and code
published whole; publishing and clearing touch nothing but a cloud assembly's own files."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sonic_deploy
from sonic_deploy.changes import assembly, synth
from sonic_deploy.changes.assembly import STAMP, check_assembly, clear_assembly, publish, staging
from sonic_deploy.changes.cli import EXIT_OK, EXIT_USAGE, main
from sonic_deploy.changes.templates import TemplateError
from tests.changes.assemblies import finish_synth
from tests.fuzz import examples
from tests.fuzz.assembly import ASSEMBLY_FILES, STACKS, edited_stamps, folder_contents

REPO_CONFIG = Path(__file__).resolve().parents[2] / "config"
TEMPLATE = {"Resources": {"Queue": {"Type": "AWS::SQS::Queue"}}}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    copy = tmp_path / "config"
    shutil.copytree(REPO_CONFIG, copy)
    return copy


def synthesized(folder: Path, config: Path, *stacks: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for stack in stacks or ("SonicSageMaker",):
        (folder / f"{stack}.template.json").write_text(json.dumps(TEMPLATE), encoding="utf-8")
    finish_synth(folder, config=config)
    return folder


def refusal(folder: Path, config: Path, environment: str = "dev") -> str:
    with pytest.raises(TemplateError) as raised:
        check_assembly(folder, environment=environment, config_dir=config)
    message = str(raised.value)
    assert "\n" not in message and "make diff ENV=dev" in message
    return message


def test_a_fresh_assembly_passes(tmp_path: Path, config: Path) -> None:
    folder = synthesized(tmp_path / "synth/dev", config, "SonicSageMaker", "SonicEcs")
    assert check_assembly(folder, environment="dev", config_dir=config) == ["SonicEcs", "SonicSageMaker"]


def test_templates_and_manifest_without_a_stamp_are_refused(tmp_path: Path, config: Path) -> None:
    """What a failed synth left before: the previous synth's templates and manifest, looking valid."""
    folder = synthesized(tmp_path / "synth/dev", config)
    (folder / STAMP).unlink()
    assert "holds no finished synth (no manifest.json or sonic-synth.json)" in refusal(folder, config)


def test_a_missing_folder_is_refused(tmp_path: Path, config: Path) -> None:
    assert "the assembly is not there" in refusal(tmp_path / "synth/dev", config)


def test_an_assembly_from_an_earlier_config_is_refused(tmp_path: Path, config: Path) -> None:
    folder = synthesized(tmp_path / "synth/dev", config)
    (config / "environments/dev.toml").write_text("# edited\n", encoding="utf-8")
    assert f"synthesized from another config than {config}/ (it changed since)" in refusal(folder, config)


def test_an_assembly_from_other_code_is_refused(
    tmp_path: Path, config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = synthesized(tmp_path / "synth/dev", config)
    monkeypatch.setattr(assembly, "source_digest", lambda: "0" * 64)
    assert "synthesized by other code than this checkout's" in refusal(folder, config)


def test_an_assembly_of_another_environment_is_refused(tmp_path: Path, config: Path) -> None:
    folder = synthesized(tmp_path / "synth/prod", config)
    shutil.move(folder, tmp_path / "synth/dev")
    assert "was synthesized for environment 'prod', not 'dev'" in refusal(tmp_path / "synth/dev", config)


@pytest.mark.parametrize(
    ("stamp", "expected"),
    [
        ({"outcome": "failed"}, "is not from a successful synth (outcome 'failed')"),
        ({"stacks": "SonicSageMaker"}, "has a stamp without its list of stacks"),
        ({"stacks": ["SonicSageMaker", 7]}, "has a stamp without its list of stacks"),
    ],
)
def test_a_stamp_that_is_not_a_success_is_refused(
    tmp_path: Path, config: Path, stamp: dict[str, object], expected: str
) -> None:
    folder = synthesized(tmp_path / "synth/dev", config)
    written = json.loads((folder / STAMP).read_text(encoding="utf-8"))
    (folder / STAMP).write_text(json.dumps(written | stamp), encoding="utf-8")
    assert expected in refusal(folder, config)


@pytest.mark.parametrize("content", [b"\xff\xfe not utf-8", b"{not json", b"[1, 2]", b"[" * 100_000])
def test_an_unreadable_stamp_is_one_line(tmp_path: Path, config: Path, content: bytes) -> None:
    folder = synthesized(tmp_path / "synth/dev", config)
    (folder / STAMP).write_bytes(content)
    message = refusal(folder, config)
    assert "stamp" in message and "\\x" not in message


def test_a_stamp_naming_a_template_that_is_gone_is_refused(tmp_path: Path, config: Path) -> None:
    folder = synthesized(tmp_path / "synth/dev", config, "SonicSageMaker", "SonicEcs")
    (folder / "SonicEcs.template.json").unlink()
    assert "names templates that are gone (SonicEcs.template.json)" in refusal(folder, config)


def test_a_template_the_synth_did_not_write_is_refused(tmp_path: Path, config: Path) -> None:
    folder = synthesized(tmp_path / "synth/dev", config)
    (folder / "SonicEcs.template.json").write_text("{}", encoding="utf-8")
    assert "holds templates its synth did not write (SonicEcs.template.json)" in refusal(folder, config)


def test_diff_and_baseline_refuse_an_unstamped_assembly(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = synthesized(tmp_path / "synth/dev", config)
    locations = ["--synthesized", str(tmp_path / "synth"), "--baselines", str(tmp_path / "baselines")]
    assert main(["--config", str(config), "check-assembly", "--env", "dev", *locations]) == EXIT_OK
    (folder / STAMP).unlink()
    for command in ("diff", "baseline", "check-assembly"):
        assert main(["--config", str(config), command, "--env", "dev", *locations]) == EXIT_USAGE
        [line] = capsys.readouterr().err.splitlines()
        assert line.startswith(f"error: no synthesized sonic stacks in {folder}/: the assembly holds no")
    assert not (tmp_path / "baselines").exists()


def test_publish_replaces_the_whole_assembly_and_keeps_other_files(tmp_path: Path, config: Path) -> None:
    out = synthesized(tmp_path / "cdk.out", config, "SonicSageMaker", "SonicEcs")
    (out / "asset.abc").mkdir()
    (out / "by-env").mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    with staging(out) as staged:
        synthesized(staged, config, "SonicSageMaker")
        (staged / "synth.lock").write_text("1", encoding="utf-8")
        publish(staged, out)
    assert sorted(p.name for p in out.iterdir()) == [
        "SonicSageMaker.template.json", "by-env", "manifest.json", "notes.txt", STAMP
    ]  # fmt: skip


def test_clear_removes_only_an_assemblys_files(tmp_path: Path, config: Path) -> None:
    out = synthesized(tmp_path / "cdk.out", config, "SonicSageMaker")
    for name in ("tree.json", "cdk.out", "SonicSageMaker.assets.json", "validation-report.json"):
        (out / name).write_text("{}", encoding="utf-8")
    (out / "asset.abc").mkdir()
    (out / "app.py").write_text("", encoding="utf-8")  # e.g. `cdk synth --output .`
    clear_assembly(out)
    assert sorted(p.name for p in out.iterdir()) == ["app.py"]


def test_clear_in_the_repo_folder_leaves_the_cdk_out_folder(tmp_path: Path, config: Path) -> None:
    """`--output .`: the version file `cdk.out` is the assembly's, the folder `cdk.out/` (by-env/) is not."""
    repo = synthesized(tmp_path / "repo", config, "SonicSageMaker")
    (repo / "cdk.out" / "by-env" / "dev").mkdir(parents=True)
    (repo / "cdk.out" / "by-env" / "dev" / "manifest.json").write_text("{}", encoding="utf-8")
    (repo / "assembly-notes").mkdir()  # not a nested assembly: no manifest
    (repo / "assembly-Stage").mkdir()
    (repo / "assembly-Stage" / "manifest.json").write_text("{}", encoding="utf-8")
    clear_assembly(repo)
    assert sorted(p.name for p in repo.iterdir()) == ["assembly-notes", "cdk.out"]
    assert (repo / "cdk.out" / "by-env" / "dev" / "manifest.json").is_file()
    with staging(repo) as staged:
        synthesized(staged, config, "SonicSageMaker")
        publish(staged, repo)
    assert (repo / "cdk.out" / "by-env" / "dev" / "manifest.json").is_file()


@pytest.mark.parametrize("output", ["a-file", "a-file/below"])
def test_the_synth_wrapper_names_an_output_it_cannot_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], output: str
) -> None:
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    status = synth.main(["--cdk", "false", "--config", str(REPO_CONFIG), "--output", str(tmp_path / output)])
    assert status == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: --output {str(tmp_path / output)!r}: cannot write a cloud assembly there")


@settings(max_examples=examples(150))
@given(data=st.data(), present=folder_contents())
def test_any_folder_is_either_a_whole_fresh_synth_or_one_line_refusal(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, present: frozenset[str]
) -> None:
    """Whatever a folder holds, the check returns only for a whole stamped synth whose templates are all
    there, and otherwise refuses in one line: never another exception, never a pass over a gap."""
    folder = tmp_path_factory.mktemp("assembly") / "dev"
    folder.mkdir()
    stacks = data.draw(st.lists(st.sampled_from(STACKS[:2]), unique=True, min_size=1), label="stacks")
    for name in present:
        (folder / name).write_text("{}", encoding="utf-8")
    assembly.write_stamp(folder, environment="dev", config_dir=REPO_CONFIG, stacks=stacks)
    whole = json.loads((folder / STAMP).read_text(encoding="utf-8"))
    stamp = data.draw(edited_stamps(whole), label="stamp")
    (folder / STAMP).write_bytes(stamp)
    later = data.draw(st.frozensets(st.sampled_from(ASSEMBLY_FILES)), label="written after the stamp")
    for name in later:  # a file of an earlier synth, or one the stamp's digest does not cover
        (folder / name).write_text('{"later": 1}', encoding="utf-8")
    try:
        found = check_assembly(folder, environment="dev", config_dir=REPO_CONFIG)
    except TemplateError as error:
        assert "\n" not in str(error) and "make diff ENV=dev" in str(error)
        return
    templates = {name.removesuffix(".template.json") for name in present if name.endswith(".template.json")}
    checked = {key: value for key, value in json.loads(stamp).items() if key != "config_dir"}
    assert checked == {key: value for key, value in whole.items() if key != "config_dir"}
    assert "manifest.json" in present and found == sorted(stacks) and not later
    assert set(stacks) <= templates  # every template it names is there
    assert templates & {"SonicSageMaker", "SonicEcs"} <= set(stacks)  # and no sonic template it did not write


def test_only_dead_locks_are_removed(tmp_path: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    (tmp_path / "synth.lock").write_text(dead.stdout.strip(), encoding="utf-8")
    (tmp_path / f"read.{os.getpid()}.1.lock").write_text(
        str(os.getpid()), encoding="utf-8"
    )  # alive: this one
    (tmp_path / "read.x.2.lock").write_text("not a pid", encoding="utf-8")
    (tmp_path / "read.0.3.lock").write_text("0", encoding="utf-8")
    assembly.remove_locks(tmp_path, only_dead=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"read.{os.getpid()}.1.lock"]


def fake_cdk(tmp_path: Path, body: str) -> str:
    """A stand-in for the CDK CLI: `body` runs with `sys` and `os` imported, arguments in sys.argv."""
    script = tmp_path / "fake_cdk.py"
    script.write_text(f"import os, sys\n{body}\n", encoding="utf-8")
    return f"{sys.executable} {script}"


def test_an_unknown_env_keeps_the_last_good_assembly(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = synthesized(tmp_path / "dev", config, "SonicSageMaker")  # stamped as environment "dev"
    cdk = fake_cdk(tmp_path, "sys.exit('the CLI must not run')")
    status = synth.main(["--cdk", cdk, "--config", str(config), "--env", "typo", "--output", str(out)])
    assert status == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ENV=typo is not an environment")
    assert check_assembly(out, environment="dev", config_dir=config) == ["SonicSageMaker"]


def test_exit_2_without_the_apps_line_is_a_failure_shown_whole(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Python exits 2 when it cannot open app.py: that is no config error, and the CLI's line stays."""
    cdk = fake_cdk(
        tmp_path,
        "print(\"python3: can't open file '/x/app.py': [Errno 2] No such file or directory\", file=sys.stderr)\n"
        "print('python3 /x/app.py: Subprocess exited with error 2', file=sys.stderr)\n"
        "sys.exit(1)",
    )
    status = synth.main(["--cdk", cdk, "--config", str(config), "--output", str(tmp_path / "cdk.out")])
    assert status == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "python3: can't open file '/x/app.py': [Errno 2] No such file or directory",
        "python3 /x/app.py: Subprocess exited with error 2",
    ]


def test_exit_2_after_the_apps_line_is_a_config_error_in_one_line(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cdk = fake_cdk(
        tmp_path,
        "print('sonic-deploy: config/x.toml: field a: bad', file=sys.stderr)\n"
        "print('python3 app.py: Subprocess exited with error 2', file=sys.stderr)\n"
        "sys.exit(1)",
    )
    status = synth.main(["--cdk", cdk, "--config", str(config), "--output", str(tmp_path / "cdk.out")])
    assert status == 2
    assert capsys.readouterr().err.splitlines() == ["sonic-deploy: config/x.toml: field a: bad"]


def test_editor_leftovers_in_config_do_not_make_an_assembly_stale(tmp_path: Path, config: Path) -> None:
    before = assembly.config_digest(config)
    for name in (".dev.toml.swp", "dev.toml~", ".DS_Store", ".#dev.toml", "notes.txt"):
        (config / "environments" / name).write_text("x", encoding="utf-8")
    assert assembly.config_digest(config) == before
    with (config / "environments" / "dev.toml").open("a", encoding="utf-8") as toml:
        toml.write("\n# edited\n")
    assert assembly.config_digest(config) != before


def test_package_data_is_part_of_the_code_digest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A change to a data file the code reads (sonic_deploy/config/aws_zones.json) makes an assembly stale."""
    package = tmp_path / "sonic_deploy"
    (package / "config").mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    zones = package / "config" / "aws_zones.json"
    zones.write_text('{"us-east-2": ["us-east-2a"]}', encoding="utf-8")
    monkeypatch.setattr(sonic_deploy, "__file__", str(package / "__init__.py"))
    before = assembly.source_digest()
    zones.write_text('{"us-east-2": ["us-east-2b"]}', encoding="utf-8")
    assert assembly.source_digest() != before


@pytest.fixture
def other_cli() -> Iterator[int]:
    """A running process standing for another CDK CLI (its PID goes into a lock file); stopped afterwards."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize("lock", ["read.{pid}.1.lock", "synth.lock"])
def test_the_wrapper_leaves_an_assembly_another_cli_holds_alone(
    tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str], other_cli: int, lock: str
) -> None:
    """E.g. a `cdk deploy --app cdk.out` reading it: neither a failed synth nor a good one touches it."""
    out = synthesized(tmp_path / "dev", config, "SonicSageMaker")
    (out / lock.format(pid=other_cli)).write_text(str(other_cli), encoding="utf-8")
    before = sorted(p.name for p in out.iterdir())
    for body in ("sys.exit(1)", "sys.exit(0)"):
        status = synth.main(
            ["--cdk", fake_cdk(tmp_path, body), "--config", str(config), "--output", str(out)]
        )
        assert status == 2
        [line] = capsys.readouterr().err.splitlines()
        assert line.startswith(f"error: {out}/: a CDK CLI (PID {other_cli}, ") and "Fix: wait for it" in line
        assert sorted(p.name for p in out.iterdir()) == before
    with staging(out) as staged, pytest.raises(assembly.AssemblyLockedError):
        publish(synthesized(staged, config, "SonicEcs"), out)
    assert check_assembly(out, environment="dev", config_dir=config) == ["SonicSageMaker"]


def test_publishing_holds_a_synth_lock_of_its_own(tmp_path: Path, config: Path, other_cli: int) -> None:
    out = synthesized(tmp_path / "dev", config, "SonicSageMaker")
    (out / "synth.lock").write_text("0", encoding="utf-8")  # a dead one: replaced
    with assembly.synth_lock(out):
        assert (out / "synth.lock").read_text(encoding="utf-8") == str(os.getpid())
        clear_assembly(out)  # our own lock does not stop us
    assert not (out / "synth.lock").exists()
    (out / "synth.lock").write_text(str(other_cli), encoding="utf-8")
    with pytest.raises(assembly.AssemblyLockedError), assembly.synth_lock(out):
        pass


def test_staging_removes_dead_staging_folders_only(tmp_path: Path, other_cli: int) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    out = tmp_path / "cdk.out"
    for name in (f"{dead.stdout.strip()}-abc", "oldstyle", f"{other_cli}-live"):
        (out / f"{assembly.STAGING_PREFIX}{name}" / "asset.x").mkdir(parents=True)
    with staging(out) as staged:
        assert staged.name.startswith(f"{assembly.STAGING_PREFIX}{os.getpid()}-")
        left = sorted(p.name for p in out.iterdir())
    assert left == sorted([f"{assembly.STAGING_PREFIX}{other_cli}-live", staged.name])


def test_publish_moves_no_leaked_staging_folder(tmp_path: Path, config: Path) -> None:
    out = tmp_path / "dev"
    with staging(out) as staged:
        synthesized(staged, config, "SonicSageMaker")
        (staged / f"{assembly.STAGING_PREFIX}1-inner" / "asset.x").mkdir(parents=True)
        publish(staged, out)
    assert not [p for p in out.iterdir() if p.name.startswith(assembly.STAGING_PREFIX)]


def test_sigterm_stops_the_wrapper_like_ctrl_c(tmp_path: Path, config: Path) -> None:
    """A CI cancel sends SIGTERM to the wrapper alone: the CLI (here a stand-in) is stopped, nothing stays."""
    started = tmp_path / "started"
    cdk = fake_cdk(
        tmp_path,
        "import signal, time\n"
        "signal.signal(signal.SIGINT, lambda *_: sys.exit(130))\n"
        "out = sys.argv[sys.argv.index('--output') + 1]\n"
        "os.makedirs(os.path.join(out, '.sonic-staging-%d-app' % os.getpid()))\n"
        f"open({str(started)!r}, 'w').close()\n"
        "time.sleep(120)",
    )
    out = synthesized(tmp_path / "dev", config, "SonicSageMaker")
    command = [sys.executable, "-m", "sonic_deploy.changes.synth", "--cdk", cdk, "--config", str(config)]
    wrapper = subprocess.Popen(
        [*command, "--output", str(out)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(1200):  # up to a minute on a busy machine
            if started.exists() or wrapper.poll() is not None:
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                wrapper.wait(timeout=0.05)
        assert wrapper.poll() is None
        wrapper.send_signal(signal.SIGTERM)
        _, stderr = wrapper.communicate(timeout=90)
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
            wrapper.wait()
    assert wrapper.returncode == 128 + signal.SIGTERM
    assert stderr.splitlines() == ["sonic-deploy: synth interrupted; no assembly was written"]
    assert sorted(p.name for p in out.iterdir()) == []


def test_a_repeated_synth_starts_from_the_published_assets(tmp_path: Path, config: Path) -> None:
    """Linked, not copied (the CDK then skips them): same inode; an asset no assets.json names is pruned."""
    out = synthesized(tmp_path / "dev", config, "SonicSageMaker")
    kept, stale = "asset." + "a" * 64, "asset." + "b" * 64
    for name in (kept, stale):
        (out / name).mkdir()
        (out / name / "index.py").write_text("print()", encoding="utf-8")
    (out / f"{stale}.zip").write_bytes(b"zip")
    with staging(out) as staged:
        assembly.seed_assets(out, staged)
        assert (staged / kept / "index.py").stat().st_ino == (out / kept / "index.py").stat().st_ino
        assert (staged / f"{stale}.zip").stat().st_ino == (out / f"{stale}.zip").stat().st_ino
        synthesized(staged, config, "SonicSageMaker")
        (staged / "SonicSageMaker.assets.json").write_text(
            json.dumps({"files": {"a": {"source": {"path": kept}}}})
        )
        assembly.prune_assets(staged)
        assembly.write_stamp(staged, environment="dev", config_dir=config, stacks=["SonicSageMaker"])
        publish(staged, out)
    assert sorted(p.name for p in out.glob("asset.*")) == [kept]
    assert check_assembly(out, environment="dev", config_dir=config) == ["SonicSageMaker"]


_ANCESTORS_CHECK = """
import sys
from pathlib import Path
from sonic_deploy.changes import assembly
if sys.argv[2] == "none":
    assembly.PROC = Path(sys.argv[1]) / "no-proc"
out = Path(sys.argv[1]) / "out"
assert assembly.live_locks(out) == [], assembly.live_locks(out)
assembly.check_unlocked(out)
"""


@pytest.mark.parametrize("proc", ["linux", "none"])
def test_the_clis_own_lock_is_not_another_clis_without_proc_either(tmp_path: Path, proc: str) -> None:
    """The CDK CLI that runs the app holds synth.lock in CDK_OUTDIR, and is not always the app's parent (a
    shell may run between them). Where /proc is missing (macOS, or hidepid) the app finds its parents with
    `ps`, or every synth would refuse its own CLI's lock. Here this test is the CLI, a shell between."""
    out = tmp_path / "out"
    out.mkdir()
    (out / assembly.SYNTH_LOCK).write_text(str(os.getpid()), encoding="utf-8")
    check = [sys.executable, "-c", _ANCESTORS_CHECK, str(tmp_path), proc]
    # `; exit $?` keeps the shell from exec'ing python in its place: python's parent is the shell.
    result = subprocess.run(
        ["sh", "-c", f"{shlex.join(check)}; exit $?"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(sonic_deploy.__file__).parent.parent)},
    )
    assert result.returncode == 0, result.stderr


def test_children_are_found_without_proc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The jsii kernel is stopped before the staging folder goes, with or without /proc."""
    monkeypatch.setattr(assembly, "PROC", tmp_path / "no-proc")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert child.pid in assembly.descendant_pids()
    finally:
        child.kill()
        child.wait()
