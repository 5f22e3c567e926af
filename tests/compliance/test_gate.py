"""The compliance gate over every environment and the air-gapped variant: nothing found by cdk-nag's four
packs, CDK's template validation, checkov or cfn-lint is left neither fixed nor acknowledged with a reason."""

from __future__ import annotations

import pytest

from sonic_deploy.compliance.gate import ACKNOWLEDGED_DOC, README, ROWS, acknowledged_doc, table, with_table
from sonic_deploy.compliance.variants import Variant
from tests.compliance.conftest import VARIANTS, scanned


def test_every_environment_and_the_closed_variant_are_scanned() -> None:
    assert [variant.name for variant in VARIANTS] == ["dev", "prod", "dev (air-gapped, TLS, FIS)"]


@pytest.mark.parametrize("tool", list(ROWS))
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda variant: variant.slug)
def test_nothing_left(variant: Variant, tool: str) -> None:
    left = [str(finding) for finding in scanned(variant).findings if finding.tool == tool]
    assert left == [], "\n".join(left)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda variant: variant.slug)
def test_no_finding_comes_from_a_tool_the_table_has_no_row_for(variant: Variant) -> None:
    unknown = [str(finding) for finding in scanned(variant).findings if finding.tool not in ROWS]
    assert unknown == [], "\n".join(unknown)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda variant: variant.slug)
def test_every_acknowledgement_has_a_reason(variant: Variant) -> None:
    silent = [
        f"{ack.tool} {ack.rule} at {ack.where}"
        for ack in scanned(variant).acknowledged
        if len(ack.reason) < 30
    ]
    assert silent == [], "\n".join(silent)


def test_the_readme_table_and_the_acknowledged_findings_are_current() -> None:
    results = [scanned(variant) for variant in VARIANTS]
    readme = README.read_text(encoding="utf-8")
    assert with_table(readme, table(results)) == readme, "the README's table is stale: run `make compliance`"
    assert ACKNOWLEDGED_DOC.read_text(encoding="utf-8") == acknowledged_doc(results), (
        f"{ACKNOWLEDGED_DOC.name} is stale: run `make compliance`"
    )
