"""One plain synth of each variant per test session, shared by the invariants and the bootstrap policy test.
The full scan (cdk-nag's packs, checkov, cfn-lint) is `make compliance`'s, which .ci/run runs after the
tests."""

from __future__ import annotations

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
from tests.conftest import CONFIG_DIR, cloudformation_validate

VARIANTS = variants(CONFIG_DIR)
_WORKDIR = Path(tempfile.mkdtemp(prefix="sonic-compliance-tests-"))


@cache
def _synthesized(variant: Variant) -> None:
    config = config_for(variant, CONFIG_DIR, _WORKDIR)
    app = App(context=cli_context(), outdir=str(_WORKDIR / f"cdk.out-{variant.slug}"))
    Validations.of(app).add_plugins(cloudformation_validate())  # an error fails the synth, as `cdk synth`'s
    add_stacks(app, load_settings(config, variant.environment))
    app.synth()


def templates(variant: Variant) -> dict[str, dict[str, Any]]:
    """The variant's synthesized templates by stack id."""
    _synthesized(variant)
    assembly = _WORKDIR / f"cdk.out-{variant.slug}"
    return {
        path.name.split(".")[0]: json.loads(path.read_text()) for path in assembly.glob("*.template.json")
    }
