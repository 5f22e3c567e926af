"""What an assembly holds, as its stamp records it: a digest of every file the synth wrote (manifest,
templates, asset manifests, staged assets), taken after the synth and checked before anything reads them, so
a byte changed in a template, a swapped or extra template or a removed asset makes the assembly stale.
The walk reads regular files only: a FIFO, a directory or a symbolic link where a file belongs is refused in
one line (a FIFO would block the read, a link loop or a directory would raise)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from sonic_deploy.changes.templates import TEMPLATE_SUFFIX, TemplateError
from sonic_deploy.user_files import RefusedFileError, kind_of, read_chunks, read_regular

STAMP = "sonic-synth.json"
MANIFEST = "manifest.json"
VALIDATION_REPORT = "validation-report.json"
_FILE_NAMES = frozenset({MANIFEST, "tree.json", "cdk.out", VALIDATION_REPORT})
_FILE_SUFFIXES = (TEMPLATE_SUFFIX, ".assets.json", ".metadata.json")
_FOLDER_PREFIXES = ("asset.", "assembly-")  # a staged asset (a file or a folder), a nested assembly
# Far above what the stacks stage (the largest asset is a ~50 MB Lambda bundle): a larger file is not ours.
LARGEST_FILE = 2**30
LARGEST_REPORT = 64 * 2**20


def _held(name: str) -> bool:
    return name in _FILE_NAMES or name.endswith(_FILE_SUFFIXES) or name.startswith(_FOLDER_PREFIXES)


def content_digest(assembly: Path) -> str:
    """The digest of every file the synth wrote into `assembly` (not the stamp, a lock or a user's file),
    by name, kind and bytes; TemplateError for an entry that is not what a synth writes."""
    digest = hashlib.sha256()
    try:
        entries = sorted(p for p in assembly.iterdir() if p.name != STAMP and _held(p.name))
    except OSError as error:
        raise TemplateError(f"{assembly}/: cannot list it ({error.strerror or error})") from None
    for entry in entries:
        mode = _mode(entry)
        if stat.S_ISDIR(mode) and entry.name == "cdk.out":
            continue  # `--output .`: the repository's cdk.out/ folder, not the assembly's version file
        if stat.S_ISDIR(mode) and entry.name.startswith(_FOLDER_PREFIXES):
            _add_folder(digest, assembly, entry)
        elif stat.S_ISREG(mode):
            _add_file(digest, assembly, entry)
        else:
            raise TemplateError(f"{entry}: {kind_of(mode)}, where the synth writes a file")
    return digest.hexdigest()


def _mode(path: Path) -> int:
    try:
        return path.lstat().st_mode
    except OSError as error:
        raise TemplateError(f"{path}: cannot read it ({error.strerror or error})") from None


def _add_file(digest: Any, assembly: Path, path: Path) -> None:
    digest.update(b"F\0" + path.relative_to(assembly).as_posix().encode("utf-8", "surrogateescape") + b"\0")
    try:
        for chunk in read_chunks(path, limit=LARGEST_FILE, follow_symlinks=False):
            digest.update(chunk)
    except RefusedFileError as error:
        raise TemplateError(f"{path}: {error.problem}") from None
    digest.update(b"\0")


def _add_folder(digest: Any, assembly: Path, folder: Path) -> None:
    """A staged folder asset, walked without following links: a link inside counts by where it points (the
    CDK stages a Lambda bundle's links as links)."""
    digest.update(b"D\0" + folder.relative_to(assembly).as_posix().encode("utf-8", "surrogateescape") + b"\0")
    for root, folders, files in os.walk(folder, onerror=_walk_error):
        folders.sort()
        for name in sorted(files + [f for f in folders if Path(root, f).is_symlink()]):
            path = Path(root, name)
            mode = _mode(path)
            if stat.S_ISLNK(mode):
                relative = path.relative_to(assembly).as_posix()
                digest.update(f"L\0{relative}\0{path.readlink()}\0".encode("utf-8", "surrogateescape"))
            elif stat.S_ISREG(mode):
                _add_file(digest, assembly, path)
            else:
                raise TemplateError(f"{path}: {kind_of(mode)}, inside a staged asset")


def _walk_error(error: OSError) -> None:
    raise TemplateError(f"{error.filename}: cannot read it ({error.strerror or error})")


def synth_errors(assembly: Path) -> list[str]:
    """The errors the synth itself reported, which the CDK CLI turns into a failed synth after the app has
    exited: the validation report's (aws-cdk-lib's CloudFormation schema checks write validation-report.json,
    conclusion "failure") and error annotations in the manifest's metadata (`aws:cdk:error`)."""
    found = []
    report = _json(assembly / VALIDATION_REPORT)
    for plugin in report.get("pluginReports", []) if isinstance(report, dict) else []:
        if isinstance(plugin, dict) and plugin.get("conclusion") == "failure":
            for violation in plugin.get("violations", []):
                if isinstance(violation, dict):
                    found.append(f"{violation.get('ruleName')}: {violation.get('description')}")
    manifest = _json(assembly / MANIFEST)
    artifacts = manifest.get("artifacts", {}) if isinstance(manifest, dict) else {}
    for artifact in artifacts.values() if isinstance(artifacts, dict) else []:
        metadata = artifact.get("metadata", {}) if isinstance(artifact, dict) else {}
        for path, entries in metadata.items() if isinstance(metadata, dict) else []:
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, dict) and entry.get("type") == "aws:cdk:error":
                    found.append(f"{path}: {entry.get('data')}")
    return found


def _json(path: Path) -> object:
    if not path.exists():
        return None
    try:
        return json.loads(read_regular(path, limit=LARGEST_REPORT, follow_symlinks=False))
    except (RefusedFileError, ValueError, RecursionError) as error:
        unreadable = {"ruleName": "unreadable", "description": str(error)}
        return {"pluginReports": [{"conclusion": "failure", "violations": [unreadable]}]}
