"""The compliance gate over every environment and the air-gapped variant: nothing found by cdk-nag's four
packs, CDK's template validation, checkov, cfn-lint or the project's invariants is left neither fixed nor
acknowledged with a reason."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from sonic_deploy.compliance import gate
from sonic_deploy.compliance.gate import (
    ACKNOWLEDGED_DOC,
    ROWS,
    SECURITY_DOC,
    acknowledged_doc,
    table,
    with_table,
)
from sonic_deploy.compliance.scan import Synthesized
from sonic_deploy.compliance.variants import Variant
from tests.compliance.conftest import VARIANTS, scanned, templates
from tests.conftest import CONFIG_DIR


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


def test_the_security_table_and_the_acknowledged_findings_are_current() -> None:
    results = [scanned(variant) for variant in VARIANTS]
    page = SECURITY_DOC.read_text(encoding="utf-8")
    assert with_table(page, table(results)) == page, (
        "docs/security.md's table is stale: run `make compliance`"
    )
    assert ACKNOWLEDGED_DOC.read_text(encoding="utf-8") == acknowledged_doc(results), (
        f"{ACKNOWLEDGED_DOC.name} is stale: run `make compliance`"
    )


def test_the_gate_fails_on_a_broken_invariant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`make compliance` runs the invariants too: a role granted logs:GetLogEvents on `*` is a finding
    (the scanners stand in as finding nothing; the template is dev's, as synthesized)."""
    assembly = tmp_path / "cdk.out"
    assembly.mkdir()
    for stack, body in templates(VARIANTS[0]).items():
        body = copy.deepcopy(body)
        if stack == "SonicEcs":
            policy = next(r for r in body["Resources"].values() if r["Type"] == "AWS::IAM::Policy")
            grant = {"Effect": "Allow", "Action": "logs:GetLogEvents", "Resource": "*"}
            policy["Properties"]["PolicyDocument"]["Statement"].append(grant)
        (assembly / f"{stack}.template.json").write_text(json.dumps(body))
    monkeypatch.setattr(gate, "synthesize", lambda *_: Synthesized(assembly, [], [], set()))
    monkeypatch.setattr(gate, "cfn_lint", lambda *_: [])
    monkeypatch.setattr(gate, "cfn_lint_ignored", lambda *_: [])
    monkeypatch.setattr(gate, "checkov", lambda *_: ([], []))
    result = gate.scan(VARIANTS[0], CONFIG_DIR, tmp_path, tmp_path / "checkov")
    [finding] = result.findings
    assert (finding.tool, finding.rule) == ("invariants", "wildcard-resources-explained")
    assert "logs:GetLogEvents on *" in str(finding) and finding.where.startswith("SonicEcs/")
