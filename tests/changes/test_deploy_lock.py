"""requirements/deploy.txt, the hash-locked install of the deploy path: it pins every dependency that
pyproject.toml's base dependencies, its `cdk` extra and requirements/deploy.in name, within their ranges,
and every pin carries hashes (pip's --require-hashes refuses the whole file otherwise)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements/deploy.txt"
DEPLOY_IN = REPO / "requirements/deploy.in"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def locked_entries(text: str) -> dict[str, tuple[str, list[str]]]:
    """{name: (version, [sha256 ...])}, read as pip reads it (backslash continuations)."""
    joined = re.sub(r"\\\n", " ", text)
    entries: dict[str, tuple[str, list[str]]] = {}
    for line in joined.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        match = PIN.match(line)
        assert match is not None, f"requirements/deploy.txt: not a `name==version --hash=...` line: {line!r}"
        entries[canonicalize_name(match.group(1))] = (
            match.group(2),
            re.findall(r"--hash=sha256:(\w+)", line),
        )
    return entries


LOCKED = locked_entries(LOCK.read_text(encoding="utf-8"))


def requirements_of_the_deploy_path() -> list[Requirement]:
    project = PYPROJECT["project"]
    own_name = canonicalize_name(project["name"])
    named = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["cdk"]]
    named += [Requirement(line) for line in deploy_in_lines()]
    return [r for r in named if canonicalize_name(r.name) != own_name]


def deploy_in_lines() -> list[str]:
    lines = DEPLOY_IN.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


@pytest.mark.parametrize("requirement", requirements_of_the_deploy_path(), ids=str)
def test_the_lock_pins_every_dependency_within_its_range(requirement: Requirement) -> None:
    name = canonicalize_name(requirement.name)
    assert name in LOCKED, (
        f"{requirement} is not in requirements/deploy.txt: run scripts/lock_requirements.sh"
    )
    version, _ = LOCKED[name]
    assert requirement.specifier.contains(version, prereleases=True), (
        f"requirements/deploy.txt pins {name}=={version}, outside {requirement}: "
        "run scripts/lock_requirements.sh"
    )


def test_every_pin_has_sha256_hashes() -> None:
    assert len(LOCKED) > 20, "expected the whole dependency tree, not only the direct dependencies"
    for name, (version, hashes) in LOCKED.items():
        assert hashes, f"{name}=={version} has no --hash: pip --require-hashes refuses the whole file"
        assert all(len(h) == 64 for h in hashes), name


def test_deploy_in_repeats_pyproject_exactly() -> None:
    """deploy.in names tools from pyproject's `dev` extra and [build-system]: the same requirement, so the
    lock cannot drift from what `make setup` installs for the tests."""
    declared = {
        canonicalize_name(Requirement(r).name): str(Requirement(r))
        for r in PYPROJECT["project"]["optional-dependencies"]["dev"] + PYPROJECT["build-system"]["requires"]
    }
    for line in deploy_in_lines():
        requirement = Requirement(line)
        in_pyproject = declared.get(canonicalize_name(requirement.name))
        assert in_pyproject == str(requirement), (
            f"requirements/deploy.in: {line!r} differs from pyproject.toml ({in_pyproject})"
        )


def test_the_parser_sees_a_missing_hash() -> None:
    entries = locked_entries("boto3==1.0 \\\n    --hash=sha256:" + "a" * 64 + "\nsix==1.17.0\n")
    assert entries["boto3"][1] and entries["six"] == ("1.17.0", [])


def test_the_cdk_cli_is_locked_with_integrity_hashes() -> None:
    """The CDK CLI comes from npm: package-lock.json pins it, and `npm ci` checks each integrity hash."""
    lock = json.loads((REPO / "package-lock.json").read_text(encoding="utf-8"))
    packages = {path: entry for path, entry in lock["packages"].items() if path}
    assert "node_modules/aws-cdk" in packages
    for path, entry in packages.items():
        assert entry.get("integrity", "").startswith("sha512-"), f"package-lock.json: {path} has no integrity"
