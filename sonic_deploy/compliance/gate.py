"""One run of every scanner, and the project's invariants, over every variant, and the table `make compliance`
prints."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from sonic_deploy.compliance.context import ROOT
from sonic_deploy.compliance.invariants import load_templates, problems
from sonic_deploy.compliance.scan import (
    NAG_PACKS,
    Acknowledged,
    Finding,
    cfn_lint,
    cfn_lint_ignored,
    checkov,
    synthesize,
)
from sonic_deploy.compliance.variants import Variant, config_for
from sonic_deploy.config import load_settings

SECURITY_DOC = ROOT / "docs" / "security.md"
ACKNOWLEDGED_DOC = ROOT / "docs" / "compliance-acknowledged.md"
TABLE_START = "<!-- compliance table: make regenerate writes it -->"
TABLE_END = "<!-- end of compliance table -->"

ROWS = {
    "AwsSolutions": "cdk-nag AwsSolutions",
    "NIST.800.53.R5": "cdk-nag NIST 800-53 rev 5",
    "HIPAA.Security": "cdk-nag HIPAA Security",
    "PCI.DSS.321": "cdk-nag PCI DSS 3.2.1",
    "CloudFormation Validate": "CDK template validation",
    "checkov": "checkov (CloudFormation)",
    "cfn-lint": "cfn-lint",
    "invariants": "the project's invariants",
}


@dataclass
class VariantResult:
    variant: Variant
    findings: list[Finding] = field(default_factory=list)
    acknowledged: list[Acknowledged] = field(default_factory=list)


def scan(variant: Variant, config_dir: Path, workdir: Path, checkov_executable: Path) -> VariantResult:
    config = config_for(variant, config_dir, workdir)
    synthesized = synthesize(config, variant.environment, workdir / f"cdk.out-{variant.slug}")
    result = VariantResult(variant, list(synthesized.findings), list(synthesized.acknowledged))
    region = load_settings(config, variant.environment).environment.region
    result.findings += cfn_lint(synthesized.templates, region)
    result.acknowledged += cfn_lint_ignored(synthesized.templates)
    failed, skipped = checkov(synthesized.assembly, checkov_executable)
    result.findings += failed
    result.acknowledged += skipped
    result.findings += invariant_findings(synthesized.templates)
    return result


def invariant_findings(templates: list[Path]) -> list[Finding]:
    """sonic_deploy/compliance/invariants.py over the variant's templates: each problem is a finding (none
    is acknowledged: an invariant that does not hold is fixed, or the invariant changed on purpose)."""
    return [
        Finding("invariants", name, problem.split(":", 1)[0], problem)
        for name, found in problems(load_templates(templates)).items()
        for problem in found
    ]


def table(results: list[VariantResult]) -> str:
    """Markdown: per check, per variant, the findings left and (after '+') the acknowledged ones."""
    header = "| check | " + " | ".join(result.variant.name for result in results) + " |"
    lines = [header, "|---" * (len(results) + 1) + "|"]
    found = [Counter(finding.tool for finding in result.findings) for result in results]
    kept = [Counter(ack.tool for ack in result.acknowledged) for result in results]
    for tool, label in ROWS.items():
        cells = []
        for result, counts, acks in zip(results, found, kept, strict=True):
            cell = str(counts[tool])
            if tool == "cfn-lint":
                rules = sorted({ack.rule for ack in result.acknowledged if ack.tool == tool})
                cell += f" (rules ignored: {', '.join(rules)})" if rules else ""
            elif acks[tool]:
                cell += f" (+{acks[tool]} acknowledged)"
            cells.append(cell)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def acknowledged_list(results: list[VariantResult]) -> str:
    """Markdown: each acknowledged finding once, with its reason and the variants it appears in."""
    seen: dict[tuple[str, str, str, str], list[str]] = {}
    for result in results:
        for ack in result.acknowledged:
            seen.setdefault((ack.tool, ack.rule, ack.where, ack.reason), []).append(result.variant.name)
    lines = ["| tool | rule | where | variants | reason |", "|---|---|---|---|---|"]
    for (tool, rule, where, reason), names in sorted(seen.items()):
        cell = reason.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {tool} | {rule} | `{where}` | {', '.join(names)} | {cell} |")
    return "\n".join(lines)


# An acknowledgement's reason says why the finding does not apply: a word or two does not.
SHORTEST_REASON = 30


def problems_of(results: list[VariantResult]) -> list[str]:
    """What fails the gate: a finding left, a finding of a tool the table has no row for, an acknowledgement
    without a real reason."""
    found = []
    for result in results:
        name = result.variant.name
        found += [f"{name}: {finding}" for finding in result.findings]
        found += [
            f"{name}: {finding.tool} has no row in the table (gate.ROWS): {finding}"
            for finding in result.findings
            if finding.tool not in ROWS
        ]
        found += [
            f"{name}: {ack.tool} {ack.rule} at {ack.where} is acknowledged without a reason (under "
            f"{SHORTEST_REASON} characters): {ack.reason!r}"
            for ack in result.acknowledged
            if len(ack.reason) < SHORTEST_REASON
        ]
    return found


def stale_docs(results: list[VariantResult]) -> list[str]:
    """The generated docs that differ from what these results write."""
    stale = []
    page = SECURITY_DOC.read_text(encoding="utf-8")
    if with_table(page, table(results)) != page:
        stale.append(f"docs/{SECURITY_DOC.name}'s table")
    if ACKNOWLEDGED_DOC.read_text(encoding="utf-8") != acknowledged_doc(results):
        stale.append(f"docs/{ACKNOWLEDGED_DOC.name}")
    return stale


def with_table(page: str, new_table: str) -> str:
    """docs/security.md with the table between its markers replaced."""
    start, end = page.index(TABLE_START) + len(TABLE_START), page.index(TABLE_END)
    return f"{page[:start]}\n{new_table}\n{page[end:]}"


def acknowledged_doc(results: list[VariantResult]) -> str:
    return (
        "# Acknowledged findings\n\n"
        "Written by `make regenerate` (`make compliance` fails when it is stale). Every finding of cdk-nag's packs, CDK's "
        "template validation, checkov and cfn-lint that is not fixed is here, with the reason given beside the "
        "resource in the code. The table of what is left is in [security.md](security.md).\n\n"
        f"{acknowledged_list(results)}\n"
    )


__all__ = [
    "NAG_PACKS",
    "VariantResult",
    "acknowledged_doc",
    "acknowledged_list",
    "invariant_findings",
    "problems_of",
    "scan",
    "stale_docs",
    "table",
    "with_table",
]
