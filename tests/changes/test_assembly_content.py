"""The stamp covers what an assembly holds: whatever is done to a finished assembly after its synth
(TAMPERING) is refused in one line, before anything reads a file that is not a regular one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sonic_deploy.changes.assembly import check_assembly
from sonic_deploy.changes.cli import EXIT_OK, main
from tests.changes.assemblies import finish_synth
from tests.changes.test_assembly import config, refusal
from tests.fuzz.assembly import TAMPERING, tamper

__all__ = ["config"]  # the fixture, shared with test_assembly.py


def finished(folder: Path, config: Path) -> Path:
    """Two templates that differ, a manifest and a folder asset, stamped as a synth leaves them."""
    folder.mkdir(parents=True)
    for stack in ("SonicSageMaker", "SonicEcs"):
        (folder / f"{stack}.template.json").write_text(json.dumps({"Description": stack}), encoding="utf-8")
    (folder / "asset.x").mkdir()
    (folder / "asset.x" / "index.py").write_text("print('synth')\n", encoding="utf-8")
    finish_synth(folder, config=config)
    return folder


@pytest.mark.parametrize("shape", TAMPERING)
def test_an_assembly_changed_after_its_synth_is_refused_in_one_line(
    tmp_path: Path, config: Path, shape: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The stamp covers what the assembly holds, not only the config and code it came from; a FIFO, a folder
    or a link where a template belongs is refused before anything reads it (no hang, no traceback)."""
    folder = finished(tmp_path / "synth/dev", config)
    assert check_assembly(folder, environment="dev", config_dir=config) == ["SonicEcs", "SonicSageMaker"]
    tamper(folder, shape)
    message = refusal(folder, config)
    assert "holds other files than its synth wrote" in message or "where the synth writes a file" in message
    status = main(
        ["--config", str(config), "check-assembly", "--env", "dev", "--synthesized", str(tmp_path / "synth")]
    )
    assert status != EXIT_OK
    [line] = capsys.readouterr().err.splitlines()
    assert "Traceback" not in line


def test_the_repositorys_cdk_out_folder_is_not_part_of_an_assembly_in_it(
    tmp_path: Path, config: Path
) -> None:
    """`--output .` puts the assembly beside the repository's cdk.out/ folder (assembly.py leaves it alone)."""
    folder = finished(tmp_path / "synth/dev", config)
    (folder / "cdk.out" / "by-env").mkdir(parents=True)
    finish_synth(folder, config=config)
    (folder / "cdk.out" / "by-env" / "later.json").write_text("{}", encoding="utf-8")
    assert check_assembly(folder, environment="dev", config_dir=config) == ["SonicEcs", "SonicSageMaker"]
