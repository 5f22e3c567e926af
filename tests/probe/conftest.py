"""Fixtures: a way to run the probe (the stand-in server: tests/standins/fixtures.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from sonic_deploy.cli import main
from tests.standins.conftest import _dummy_aws

from .harness import ProbeRun

__all__ = ["_dummy_aws"]


@pytest.fixture
def run_probe(tmp_path: Path) -> Callable[..., ProbeRun]:
    runs = iter(range(1000))

    def run(*argv: str) -> ProbeRun:
        out = tmp_path / f"run{next(runs)}"
        code = main(["probe", *argv, "--out", str(out), "--quiet", "--no-report"])
        return ProbeRun(out, code)

    return run
