"""`changes diff` and `changes baseline` on input they cannot use: a template whose Resources is not a
table, a baselines folder that cannot be written (/proc, /sys). One line and exit 2, never a traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sonic_deploy.changes.cli import EXIT_USAGE
from tests.changes.test_changes_cli import endpoint_stack, run, write


@pytest.mark.parametrize("resources", [[], ["Endpoint"], "Endpoint", 7])
@pytest.mark.parametrize("where", ["synth", "baselines"])
def test_a_template_whose_resources_is_not_a_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], resources: Any, where: str
) -> None:
    write(tmp_path / "baselines/dev/SonicSageMaker.template.json", endpoint_stack("sonic-dev"))
    write(tmp_path / "synth/dev/SonicSageMaker.template.json", endpoint_stack("sonic-dev"))
    write(tmp_path / f"{where}/dev/SonicSageMaker.template.json", {"Resources": resources})
    assert run(tmp_path, "diff", "--env", "dev") == EXIT_USAGE
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ") and "SonicSageMaker.template.json: Resources = " in line, line
    assert "a template's Resources is a JSON object" in line


@pytest.mark.parametrize("baselines", ["/proc/sonic-baselines", "/sys/sonic-baselines"])
def test_baselines_that_cannot_be_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], baselines: str
) -> None:
    if not Path(baselines).parent.is_dir():
        pytest.skip(f"no {Path(baselines).parent} here")
    write(tmp_path / "synth/dev/SonicSageMaker.template.json", endpoint_stack("sonic-dev"))
    status = run(tmp_path, "baseline", "--env", "dev", "--baselines", baselines)
    assert status == EXIT_USAGE
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"error: --baselines '{baselines}': cannot write ") and "Fix: " in line, line
