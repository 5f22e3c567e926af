"""One scan of each variant per test session, shared by the gate and the invariants; one plain synth of the
branches variant (not scanned: the bootstrap policy test reads its templates)."""

from __future__ import annotations

import json
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from aws_cdk import App

from sonic_deploy.compliance.__main__ import DEFAULT_CHECKOV
from sonic_deploy.compliance.context import cli_context
from sonic_deploy.compliance.gate import VariantResult, scan
from sonic_deploy.compliance.variants import Variant, config_for, variants
from sonic_deploy.config import load_settings
from sonic_deploy.stacks import add_stacks
from tests.conftest import CONFIG_DIR

VARIANTS = variants(CONFIG_DIR)
_WORKDIR = Path(tempfile.mkdtemp(prefix="sonic-compliance-tests-"))


@cache
def scanned(variant: Variant) -> VariantResult:
    assert DEFAULT_CHECKOV.is_file(), (
        f"{DEFAULT_CHECKOV} is missing: `make checkov` installs it (make test does)"
    )
    return scan(variant, CONFIG_DIR, _WORKDIR, DEFAULT_CHECKOV)


@cache
def _synthesized(variant: Variant) -> None:
    config = config_for(variant, CONFIG_DIR, _WORKDIR)
    app = App(context=cli_context(), outdir=str(_WORKDIR / f"cdk.out-{variant.slug}"))
    add_stacks(app, load_settings(config, variant.environment))
    app.synth()


def templates(variant: Variant) -> dict[str, dict[str, Any]]:
    """The variant's synthesized templates by stack id."""
    if variant.branches:
        _synthesized(variant)
    else:
        scanned(variant)
    assembly = _WORKDIR / f"cdk.out-{variant.slug}"
    return {
        path.name.split(".")[0]: json.loads(path.read_text()) for path in assembly.glob("*.template.json")
    }
