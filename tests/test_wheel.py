"""`make wheel`: what a client host installs (sonic-deploy is not on PyPI: docs/client.md, "Install") holds
every module and data file of the package, and the extras the docs and examples name."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.cdk_context import ROOT

EXTRAS = {"client", "probe", "pipecat", "livekit", "plan", "cdk"}


def test_the_wheel_holds_the_whole_package_and_its_extras(tmp_path: Path) -> None:
    # Built from a copy: setuptools writes build/ and egg-info beside the sources, which a second
    # `make test` beside this one would share.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "sonic_deploy", source / "sonic_deploy", ignore=shutil.ignore_patterns("__pycache__")
    )
    make = (ROOT / "Makefile").read_text()
    assert "pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation -w dist ." in make
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps"]
    done = subprocess.run(
        [*command, "--no-build-isolation", "-w", str(tmp_path / "dist"), "."],
        cwd=source, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("sonic_deploy-*-py3-none-any.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    package = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "sonic_deploy").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert package - names == set()
    (metadata,) = [name for name in names if name.endswith(".dist-info/METADATA")]
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    provided = {
        line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Provides-Extra:")
    }
    assert EXTRAS - provided == set()
