"""The compliance gate (`make compliance`, which .ci/run runs after `make test`): what fails it, shown on
results made here, and its command's exit and docs check; the scan itself runs there, not in the unit run."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from sonic_deploy.compliance import __main__ as command
from sonic_deploy.compliance import gate
from sonic_deploy.compliance.gate import (
    ACKNOWLEDGED_DOC,
    SECURITY_DOC,
    VariantResult,
    problems_of,
    stale_docs,
)
from sonic_deploy.compliance.scan import Acknowledged, Finding, Synthesized
from sonic_deploy.compliance.variants import Variant
from tests.compliance.conftest import VARIANTS, templates
from tests.conftest import CONFIG_DIR

REASON = "a reason long enough to say why the finding does not apply here"


def test_every_environment_and_the_closed_variants_its_routes_offer_are_scanned() -> None:
    assert [variant.name for variant in VARIANTS] == [
        "dev",
        "dev-eks",
        "prod",
        "dev (air-gapped, TLS, FIS)",
        "dev-eks (air-gapped, TLS from a Private CA)",
        "dev-eks (an existing cluster and VPC)",
    ]
    assert len({variant.slug for variant in VARIANTS}) == len(VARIANTS)  # each its own cdk.out and config


def _result(*findings: Finding, acks: tuple[Acknowledged, ...] = ()) -> VariantResult:
    return VariantResult(Variant("dev"), list(findings), list(acks))


def test_a_clean_result_passes_and_each_kind_of_problem_fails() -> None:
    assert problems_of([_result(acks=(Acknowledged("checkov", "CKV_AWS_1", "SonicEcs/X", REASON),))]) == []
    [left] = problems_of([_result(Finding("checkov", "CKV_AWS_1", "SonicEcs/X"))])
    assert left == "dev: checkov CKV_AWS_1 at SonicEcs/X"
    unknown = problems_of([_result(Finding("tfsec", "R1", "SonicEcs/X"))])
    assert len(unknown) == 2 and "tfsec has no row in the table" in unknown[1]
    [silent] = problems_of([_result(acks=(Acknowledged("checkov", "CKV_AWS_1", "SonicEcs/X", "ok"),))])
    assert "acknowledged without a reason" in silent and "'ok'" in silent


def test_the_docs_are_stale_when_the_results_differ(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    security, acknowledged = tmp_path / "security.md", tmp_path / "acknowledged.md"
    security.write_text(f"intro\n{gate.TABLE_START}\nold\n{gate.TABLE_END}\nrest\n")
    monkeypatch.setattr(gate, "SECURITY_DOC", security)
    monkeypatch.setattr(gate, "ACKNOWLEDGED_DOC", acknowledged)
    results = [_result(acks=(Acknowledged("checkov", "CKV_AWS_1", "SonicEcs/X", REASON),))]
    acknowledged.write_text(gate.acknowledged_doc(results))
    assert stale_docs(results) == [f"docs/{security.name}'s table"]
    security.write_text(gate.with_table(security.read_text(), gate.table(results)))
    assert stale_docs(results) == []
    assert stale_docs([_result()]) == [f"docs/{security.name}'s table", f"docs/{acknowledged.name}"]


def test_the_command_fails_on_stale_docs_only_when_asked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shipped docs against a result that differs from them: `--check-docs` fails and says the fix."""
    monkeypatch.setattr(command, "scan", lambda variant, *_: VariantResult(variant))
    assert command.main([]) == 0
    assert command.main(["--check-docs"]) == 1
    out = capsys.readouterr().out
    assert f"docs/{SECURITY_DOC.name}'s table is stale: run `make regenerate`" in out
    assert f"docs/{ACKNOWLEDGED_DOC.name} is stale" in out


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
