"""One plain synth of each variant per test session, shared by the invariants, the EKS variants' fixtures and
the bootstrap policy test; under pytest-xdist, shared by the workers too: the first worker that needs a
variant synthesizes it into `SHARED_SYNTHS` (tests/conftest.py), the others wait for it and read it. The
full scan (cdk-nag's packs, checkov, cfn-lint) is `make compliance`'s, which .ci/run runs after the tests."""

from __future__ import annotations

import fcntl
import json
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from aws_cdk import App, Validations

from sonic_deploy.compliance.context import cli_context
from sonic_deploy.compliance.variants import Variant, config_for, variants
from sonic_deploy.config import load_settings
from sonic_deploy.stacks import add_stacks
from tests.conftest import CONFIG_DIR, SHARED_SYNTHS, cloudformation_validate

VARIANTS = variants(CONFIG_DIR)
_WORKDIR = Path(tempfile.mkdtemp(prefix="sonic-compliance-tests-"))
_DONE = "synthesized"


def _synthesize(variant: Variant, assembly: Path) -> None:
    config = config_for(variant, CONFIG_DIR, _WORKDIR)
    app = App(context=cli_context(), outdir=str(assembly))
    Validations.of(app).add_plugins(cloudformation_validate())  # an error fails the synth, as `cdk synth`'s
    add_stacks(app, load_settings(config, variant.environment))
    app.synth()


@cache
def _synthesized(variant: Variant) -> Path:
    """The folder of the variant's assembly."""
    if not SHARED_SYNTHS:
        _synthesize(variant, _WORKDIR / f"cdk.out-{variant.slug}")
        return _WORKDIR / f"cdk.out-{variant.slug}"
    assembly = SHARED_SYNTHS[0] / f"cdk.out-{variant.slug}"
    with (SHARED_SYNTHS[0] / f"{variant.slug}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the worker dies
        if not (assembly / _DONE).exists():  # a worker that failed or died leaves none: this one tries
            _synthesize(variant, assembly)
            (assembly / _DONE).touch()
    return assembly


def templates(variant: Variant) -> dict[str, dict[str, Any]]:
    """The variant's synthesized templates by stack id."""
    return {
        path.name.split(".")[0]: json.loads(path.read_text())
        for path in _synthesized(variant).glob("*.template.json")
    }
