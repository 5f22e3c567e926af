"""A cloud assembly is either whole and current or not there: the app stages its synth and publishes it
with a stamp; everything that reads an assembly (the change classifier, `make cdk-diff`) checks the stamp.

How the CDK CLI runs the app (aws/aws-cdk-cli, packages/aws-cdk/lib/cxapp/exec.ts): it creates the
`--output` folder, passes it as CDK_OUTDIR, takes a write lock there (`synth.lock`, holding its PID;
packages/@aws-cdk/toolkit-lib/lib/api/rwlock.ts), runs the app, and on success turns it into a read lock
(`read.<pid>.<n>.lock`) while it reads the assembly. When the app fails it releases the lock and reads
nothing, but it never empties the folder: the previous synth's manifest and templates stay, looking valid.
So the app synthesizes into a staging folder inside the output and replaces the output's assembly files
only when the synth succeeded, and removes them when it failed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sonic_deploy
from sonic_deploy.changes.assembly_content import MANIFEST as MANIFEST
from sonic_deploy.changes.assembly_content import STAMP as STAMP
from sonic_deploy.changes.assembly_content import content_digest
from sonic_deploy.changes.targets import ROUTES_BY_STACK_ID
from sonic_deploy.changes.templates import TEMPLATE_SUFFIX, TemplateError
from sonic_deploy.user_files import RefusedFileError, read_regular

# STAMP is written last into a finished assembly: who synthesized it, from which config and code, which
# stacks, and a digest of what the assembly holds (assembly_content.py).
STAMP_FORMAT = 1
SYNTHESIZED = "synthesized"
STAGING_PREFIX = ".sonic-staging-"
INTERRUPTED = "synth interrupted; no assembly was written"
# What `app.synth()` writes into an assembly (aws-cdk-lib's cloud assembly: manifest.json, tree.json, the
# `cdk.out` version file, validation-report.json, one template, assets and metadata file per stack, staged `asset.*` files and
# nested `assembly-*` folders). Only these are ever removed: an `--output .` must not empty the repo, and the
# names the CDK writes as files (the version file `cdk.out` among them) are removed only as files, so that
# `--output .` leaves the folder `cdk.out/` (and its `by-env/`) alone; an `assembly-*` folder only when it
# is a nested assembly (holds a manifest).
_ASSEMBLY_NAMES = frozenset({MANIFEST, "tree.json", "cdk.out", "validation-report.json", STAMP})
_ASSEMBLY_SUFFIXES = (TEMPLATE_SUFFIX, ".assets.json", ".metadata.json")
_ASSET_PREFIX, _NESTED_PREFIX = "asset.", "assembly-"
# The CLI's lock files (rwlock.ts): `synth.lock` and `read.<pid>.<counter>.lock`, each holding a PID.
SYNTH_LOCK = "synth.lock"
_LOCK_NAMES = (SYNTH_LOCK, "read.*.lock")


def is_assembly_file(path: Path) -> bool:
    """Whether `path` is one of the files or folders a synth writes into its assembly."""
    name = path.name
    if name.startswith(_ASSET_PREFIX):  # a staged file or folder asset
        return True
    if name.startswith(_NESTED_PREFIX):
        return path.is_dir() and not path.is_symlink() and (path / MANIFEST).is_file()
    is_file = path.is_symlink() or not path.is_dir()
    return is_file and (name in _ASSEMBLY_NAMES or name.endswith(_ASSEMBLY_SUFFIXES))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def clear_assembly(directory: Path) -> None:
    """Remove a cloud assembly's files from `directory` (stamp and manifest first, so that an interrupted
    clear never leaves a stamp or manifest naming files that are gone); other files stay. Refused while
    another CLI holds a lock there (AssemblyLockedError)."""
    if not directory.is_dir():
        return
    check_unlocked(directory)
    for name in (STAMP, MANIFEST):
        if is_assembly_file(directory / name):
            (directory / name).unlink(missing_ok=True)
    for path in sorted(directory.iterdir()):
        if is_assembly_file(path):
            _remove(path)


def publish(staged: Path, directory: Path) -> None:
    """Replace the assembly in `directory` with the one in `staged`: the old one goes first, then the new
    files, the manifest next to last and the stamp last, so that a reader sees a stamp only on a whole one."""
    clear_assembly(directory)
    directory.mkdir(parents=True, exist_ok=True)
    # Only the assembly's own files: not a lock, nor a staging folder an interrupted app left inside.
    entries = [p for p in sorted(staged.iterdir()) if p.name not in (MANIFEST, STAMP) and is_assembly_file(p)]
    for path in [*entries, staged / MANIFEST, staged / STAMP]:
        if path.exists():
            path.replace(directory / path.name)


class AssemblyLockedError(TemplateError):
    """Another process (a CDK CLI) holds a lock on the assembly folder."""


PROC = Path("/proc")


def process_parents() -> dict[int, int]:
    """Every process's parent: from Linux's /proc/<pid>/stat, else from `ps` (macOS, or /proc mounted with
    hidepid). The CDK CLI that runs the app holds `synth.lock` in CDK_OUTDIR: without its parents the app
    would take that lock for another CLI's."""
    parents = {}
    for stat in PROC.glob("[0-9]*/stat"):
        try:  # "pid (comm) state ppid ...": comm may hold spaces and parentheses
            parents[int(stat.parent.name)] = int(
                stat.read_text(encoding="utf-8").rsplit(")", 1)[1].split()[1]
            )
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    if os.getpid() in parents:
        return parents
    try:
        listed = subprocess.run(
            ["ps", "-A", "-o", "pid=", "-o", "ppid="], capture_output=True, text=True, check=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return parents
    for line in listed.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
            parents[int(fields[0])] = int(fields[1])
    return parents


def _ancestors() -> set[int]:
    """This process and its parents."""
    parents = process_parents()
    pids, parent = {os.getpid()}, parents.get(os.getpid(), os.getppid())
    while parent > 1 and parent not in pids:
        pids.add(parent)
        parent = parents.get(parent, 0)
    return pids


def descendant_pids() -> list[int]:
    """This process's children and theirs: the jsii runtime's `node` runs the kernel in a child `node` of its
    own."""
    parents = process_parents()
    found, frontier = [], {os.getpid()}
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier and pid not in found]
        found.extend(children)
        frontier = set(children)
    return found


def live_locks(directory: Path) -> list[tuple[Path, int]]:
    """The CLI's lock files in `directory` whose PID runs and is not this process or one of its parents."""
    mine = _ancestors()
    found = []
    for pattern in _LOCK_NAMES:
        for path in sorted(directory.glob(pattern)):
            pid = _lock_pid(path)
            if pid is not None and pid not in mine and _running(path):
                found.append((path, pid))
    return found


def check_unlocked(directory: Path) -> None:
    """Refuse to change an assembly another CLI is synthesizing into or reading (rwlock.ts: a `cdk deploy
    --app cdk.out` holds `read.<pid>.<n>.lock` while it deploys from it, a `cdk synth` holds `synth.lock`)."""
    for lock, pid in live_locks(directory)[:1]:
        doing = "synthesizing into" if lock.name == SYNTH_LOCK else "reading"
        raise AssemblyLockedError(
            f"{directory}/: a CDK CLI (PID {pid}, {lock.name}) is {doing} this assembly; nothing was changed. "
            f"Fix: wait for it to finish (or stop it: kill {pid}), then synthesize again"
        )


@contextmanager
def synth_lock(directory: Path) -> Iterator[None]:
    """Hold the CLI's write lock (`synth.lock` with this PID, as rwlock.ts writes it) while the assembly in
    `directory` is replaced or removed, so that a CLI starting meanwhile waits or refuses, as for a synth."""
    check_unlocked(directory)
    remove_locks(directory, only_dead=True)
    lock = directory / SYNTH_LOCK
    try:
        handle = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:  # taken between the check and here
        check_unlocked(directory)
        raise
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        file.write(str(os.getpid()))
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)


def remove_locks(directory: Path, *, only_dead: bool = False) -> None:
    """The CLI's lock files in a folder whose CLI has exited (killed by Ctrl-C, it cannot remove them), or
    with `only_dead` those whose PID is not running: the next CLI ignores those anyway (rwlock.ts checks
    each PID's liveness), but a plain `cdk synth` interrupted by Ctrl-C leaves its `synth.lock` behind."""
    if directory.is_dir():
        for pattern in _LOCK_NAMES:
            for path in directory.glob(pattern):
                if not only_dead or not _running(path):
                    path.unlink(missing_ok=True)


def _lock_pid(lock: Path) -> int | None:
    try:
        return int(lock.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None


def _running(lock: Path) -> bool:
    pid = _lock_pid(lock)
    return pid is not None and _pid_running(pid)


def _pid_running(pid: int) -> bool:
    if pid <= 0:  # os.kill(0, ...) would signal our own process group
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:  # another user's process: running
        return True
    except OSError:
        return False
    return True


def seed_assets(directory: Path, staged: Path) -> None:
    """Hard-link the staged assets (`asset.*`) of the assembly in `directory` into `staged` before a synth.
    aws-cdk-lib skips an asset whose `asset.<hash>` is already in the outdir (core/lib/asset-staging.ts,
    AssetStaging.stageAsset: "Is the work already done?" returns when the target path exists), so a repeated
    synth reuses them instead of copying the 50 MB Lambda bundle again. Links, not moves: the published
    assembly stays whole while the synth runs. One that cannot be linked is left for the CDK to copy."""
    for path in sorted(directory.glob(f"{_ASSET_PREFIX}*")) if directory.is_dir() else []:
        target = staged / path.name
        if target.exists() or path.is_symlink():
            continue
        try:
            if path.is_dir():
                shutil.copytree(path, target, symlinks=True, copy_function=os.link)
            else:
                os.link(path, target)
        except OSError:
            _remove(target)


def prune_assets(assembly: Path) -> None:
    """Remove the `asset.*` entries that no `*.assets.json` of the assembly names (seeded from an earlier
    synth whose assets changed since), so that they are not published again and again."""
    manifests = [*assembly.glob("*.assets.json"), *assembly.glob(f"{_NESTED_PREFIX}*/*.assets.json")]
    named = "".join(
        p.read_text(encoding="utf-8", errors="replace") for p in manifests
    )  # a stage's: "../asset."
    for path in assembly.glob(f"{_ASSET_PREFIX}*"):
        if path.name not in named:
            _remove(path)


def remove_dead_staging(directory: Path) -> None:
    """Staging folders whose process is gone (killed: SIGKILL, or a kernel that outlived its app): each is
    named `.sonic-staging-<pid>-...`; one without a PID is from an older version, and dead too."""
    for path in directory.glob(f"{STAGING_PREFIX}*"):
        pid_text = path.name.removeprefix(STAGING_PREFIX).split("-", 1)[0]
        pid = int(pid_text) if pid_text.isdigit() else 0
        if pid <= 0 or not _pid_running(pid):
            _remove(path)


def remove_own_staging(directory: Path) -> None:
    """This process's staging folders: after a signal that came between making one and knowing its name."""
    for path in directory.glob(f"{STAGING_PREFIX}{os.getpid()}-*"):
        _remove(path)


@contextmanager
def staging(directory: Path) -> Iterator[Path]:
    """A fresh folder inside `directory` (same file system, so publishing renames), removed afterwards;
    dead ones left by earlier runs go first."""
    directory.mkdir(parents=True, exist_ok=True)
    remove_dead_staging(directory)
    staged = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=directory))
    try:  # an interruption between mkdtemp and here leaves the folder: it is named to be recognised
        yield staged
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def _digest(files: Iterable[tuple[str, Path]]) -> str:
    digest = hashlib.sha256()
    for name, path in sorted(files):
        digest.update(name.encode("utf-8") + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _digested(path: Path, root: Path) -> bool:
    """Not editor leftovers (`.dev.toml.swp`, `.#dev.toml`, `dev.toml~`, `.DS_Store`) nor bytecode."""
    parts = path.relative_to(root).parts
    return path.is_file() and "__pycache__" not in parts and not any(p.startswith((".", "#")) for p in parts)


def config_digest(config_dir: Path) -> str:
    """What the loader reads: the config folder's TOML files (sonic_deploy/config/loader.py reads the named
    `*.toml` files and `environments/<env>.toml`); an editor's swap or backup file changes nothing."""
    files = [p for p in config_dir.rglob("*.toml") if _digested(p, config_dir)]
    return _digest((p.relative_to(config_dir).as_posix(), p) for p in files)


PACKAGE_FILES = ("*.py", "*.json", "*.toml", "*.wav")
"""The code that builds the stacks and the package data it reads (e.g. sonic_deploy/config's JSON)."""


def source_digest() -> str:
    """The code that builds the stacks: the sonic_deploy package's Python and data files, and app.py."""
    package = Path(sonic_deploy.__file__).resolve().parent
    found = {p for pattern in PACKAGE_FILES for p in package.rglob(pattern) if _digested(p, package)}
    files = [(p.relative_to(package).as_posix(), p) for p in found]
    app = package.parent / "app.py"
    if app.is_file():
        files.append(("../app.py", app))
    return _digest(files)


@dataclass(frozen=True)
class Digests:
    """The config's and the code's digests, taken before the synth reads them: a file saved while the
    synth runs then makes its assembly stale, instead of stamping old templates with the new config."""

    config: str
    source: str

    @classmethod
    def of(cls, config_dir: Path) -> Digests:
        return cls(config=config_digest(config_dir), source=source_digest())


def write_stamp(
    assembly: Path,
    *,
    environment: str,
    config_dir: Path,
    stacks: Sequence[str],
    digests: Digests | None = None,
) -> None:
    """`digests` as taken before the synth read the config (default: now, for assemblies made by hand)."""
    digests = digests or Digests.of(config_dir)
    stamp = {
        "format": STAMP_FORMAT,
        "outcome": SYNTHESIZED,
        "environment": environment,
        "config_dir": str(config_dir.resolve()),
        "config_digest": digests.config,
        "source_digest": digests.source,
        "stacks": sorted(stacks),
        "content_digest": content_digest(assembly),
    }
    (assembly / STAMP).write_text(json.dumps(stamp, indent=1) + "\n", encoding="utf-8")


def check_assembly(assembly: Path, *, environment: str, config_dir: Path) -> list[str]:
    """The stack IDs of a finished synth of `environment` from the current config and code, or a
    TemplateError naming what is wrong with the assembly and the command that makes a fresh one."""
    fix = f"synthesize it again: `make diff ENV={environment}` (or `make synth-envs ENV={environment}`)"
    stamp_path = assembly / STAMP
    if not (assembly / MANIFEST).is_file() or not stamp_path.is_file():
        what = (
            "is not there" if not assembly.is_dir() else f"holds no finished synth (no {MANIFEST} or {STAMP})"
        )
        raise TemplateError(f"no synthesized sonic stacks in {assembly}/: the assembly {what}; {fix}")
    stamp = _read_stamp(stamp_path, fix)
    problem = None
    if stamp.get("format") != STAMP_FORMAT or stamp.get("outcome") != SYNTHESIZED:
        problem = f"is not from a successful synth (outcome {stamp.get('outcome')!r})"
    elif stamp.get("environment") != environment:
        problem = f"was synthesized for environment {stamp.get('environment')!r}, not {environment!r}"
    elif stamp.get("config_digest") != config_digest(config_dir):
        problem = f"was synthesized from another config than {config_dir}/ (it changed since)"
    elif stamp.get("source_digest") != source_digest():
        problem = "was synthesized by other code than this checkout's (sonic_deploy or app.py changed since)"
    listed = stamp.get("stacks")
    stacks = [s for s in listed if isinstance(s, str)] if isinstance(listed, list) else []
    if problem is None and (not isinstance(listed, list) or len(stacks) != len(listed)):
        problem = "has a stamp without its list of stacks"
    if problem is None:
        present = {p.name.removesuffix(TEMPLATE_SUFFIX) for p in assembly.glob(f"*{TEMPLATE_SUFFIX}")}
        missing = sorted(set(stacks) - present)
        unlisted = sorted((present & set(ROUTES_BY_STACK_ID)) - set(stacks))
        if missing:
            problem = f"names templates that are gone ({', '.join(s + TEMPLATE_SUFFIX for s in missing)})"
        elif unlisted:
            problem = f"holds templates its synth did not write ({', '.join(s + TEMPLATE_SUFFIX for s in unlisted)})"
        elif stamp.get("content_digest") != _content_digest(assembly, fix):
            problem = "holds other files than its synth wrote (one was changed, added or removed since)"
    if problem is not None:
        raise TemplateError(f"{assembly}/: the assembly {problem}; {fix}")
    return stacks


def _content_digest(assembly: Path, fix: str) -> str:
    try:
        return content_digest(assembly)
    except TemplateError as error:  # a FIFO, a folder or a link where a file belongs
        raise TemplateError(f"{error}; {fix}") from None


def _read_stamp(path: Path, fix: str) -> dict[str, Any]:
    try:
        stamp = json.loads(read_regular(path, limit=2**20).decode("utf-8"))
    except (RefusedFileError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise TemplateError(f"{path}: unreadable stamp ({type(error).__name__}); {fix}") from None
    if not isinstance(stamp, dict):
        raise TemplateError(f"{path}: the stamp is not a JSON object; {fix}")
    return stamp
