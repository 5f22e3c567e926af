"""Hand-written assemblies made to look as a successful synth leaves them (manifest and stamp), so the
change classifier's tests can feed it templates without running the app."""

from __future__ import annotations

from pathlib import Path

from sonic_deploy.changes.assembly import MANIFEST, write_stamp
from sonic_deploy.changes.templates import TEMPLATE_SUFFIX


def finish_synth(assembly: Path, *, config: Path) -> None:
    """Stamp `<synthesized>/<env>/` as a synth of `config` holding the templates now in it."""
    stacks = [p.name.removesuffix(TEMPLATE_SUFFIX) for p in assembly.glob(f"*{TEMPLATE_SUFFIX}")]
    (assembly / MANIFEST).write_text("{}", encoding="utf-8")
    write_stamp(assembly, environment=assembly.name, config_dir=config, stacks=stacks)


def finish_synths(synthesized: Path, *, config: Path) -> None:
    for assembly in sorted(synthesized.iterdir()) if synthesized.is_dir() else []:
        if any(assembly.glob(f"*{TEMPLATE_SUFFIX}")):
            finish_synth(assembly, config=config)
