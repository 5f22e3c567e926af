"""One scan of each variant per test session, shared by the gate and the invariants."""

from __future__ import annotations

import json
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from sonic_deploy.compliance.__main__ import DEFAULT_CHECKOV
from sonic_deploy.compliance.gate import VariantResult, scan
from sonic_deploy.compliance.variants import Variant, variants
from tests.conftest import CONFIG_DIR

VARIANTS = variants(CONFIG_DIR)
_WORKDIR = Path(tempfile.mkdtemp(prefix="sonic-compliance-tests-"))


@cache
def scanned(variant: Variant) -> VariantResult:
    assert DEFAULT_CHECKOV.is_file(), (
        f"{DEFAULT_CHECKOV} is missing: `make checkov` installs it (make test does)"
    )
    return scan(variant, CONFIG_DIR, _WORKDIR, DEFAULT_CHECKOV)


def templates(variant: Variant) -> dict[str, dict[str, Any]]:
    """The variant's synthesized templates by stack id."""
    scanned(variant)
    assembly = _WORKDIR / f"cdk.out-{variant.slug}"
    return {
        path.name.split(".")[0]: json.loads(path.read_text()) for path in assembly.glob("*.template.json")
    }
