"""The scanners, each over one variant's synthesized templates: cdk-nag's packs (as CDK validation plugins,
during synth), cfn-lint (its Python API) and checkov (its own virtualenv: it pins old dependencies)."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from aws_cdk import App, CloudFormationValidatePlugin, Validations

from sonic_deploy.compliance.context import cli_context
from sonic_deploy.config import load_settings
from sonic_deploy.constructs.api_load_balancer import PLAINTEXT_WARNING
from sonic_deploy.constructs.findings import CFN_LINT_REASONS
from sonic_deploy.stacks import add_stacks

# cdk-nag's packs, by the plugin name the validation report gives them.
NAG_PACKS = {
    "AwsSolutions": "AwsSolutionsChecks",
    "NIST.800.53.R5": "NIST80053R5Checks",
    "HIPAA.Security": "HIPAASecurityChecks",
    "PCI.DSS.321": "PCIDSS321Checks",
}
CHECKOV_TIMEOUT_S = 600
# Synth warnings kept on purpose, by (tool, rule) as the validation report names them: acknowledging one in
# the app would stop synth printing it, so the gate records it as acknowledged here, with its reason.
DELIBERATE_WARNINGS = {
    ("Construct Annotations", f"Annotation::{PLAINTEXT_WARNING}"): "a plain listener, warned at every synth: "
    "dev's default or allow_plaintext_outside_dev = true accepted it (config refuses tls = false otherwise)",
}


@dataclass(frozen=True)
class Finding:
    tool: str  # a NAG_PACKS key, "cfn-lint" or "checkov"
    rule: str
    where: str  # a construct path, or template/logical id
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.tool} {self.rule} at {self.where}" + (f": {self.detail}" if self.detail else "")


@dataclass(frozen=True)
class Acknowledged:
    tool: str
    rule: str
    where: str
    reason: str


@dataclass
class Synthesized:
    assembly: Path
    findings: list[Finding]
    acknowledged: list[Acknowledged]
    reported: set[str]  # the tools the validation report has a section for

    @property
    def templates(self) -> list[Path]:
        return sorted(self.assembly.glob("*.template.json"))


def nag_app(outdir: Path) -> App:
    """An app with every cdk-nag pack as a validation plugin and cdk.json's context, as `cdk synth` has it."""
    import cdk_nag

    app = App(context=cli_context(), outdir=str(outdir))
    packs = (getattr(cdk_nag, pack)(app) for pack in NAG_PACKS.values())
    Validations.of(app).add_plugins(_cloudformation_validate(), *packs)
    return app


@cache
def _cloudformation_validate() -> CloudFormationValidatePlugin:
    """CDK's own template checks, registered so that CDK_VALIDATION=false (the unit tests set it) cannot drop
    them from the gate; one engine per process: building it takes a CPU-second."""
    return CloudFormationValidatePlugin()


def synth_and_report(app: App) -> Synthesized:
    """Synthesize the app and read its validation report: what each plugin found, and what was acknowledged
    (with the acknowledgement's reason)."""
    try:
        app.synth()
    except RuntimeError as error:  # the plugins fail synth when they find something: read the report
        if "ValidationFailed" not in str(error):
            raise
    outdir = Path(app.outdir)
    report = json.loads((outdir / "validation-report.json").read_text())
    reported = {_pack_of(plugin["pluginName"]) for plugin in report["pluginReports"]}
    findings: list[Finding] = []
    acknowledged: list[Acknowledged] = []
    for plugin in report["pluginReports"]:
        tool = _pack_of(plugin["pluginName"])
        for violation in plugin["violations"]:
            deliberate = DELIBERATE_WARNINGS.get((tool, violation["ruleName"]))
            for construct in violation["violatingConstructs"]:
                where = construct["constructPath"]
                if deliberate is not None:
                    acknowledged.append(Acknowledged(tool, violation["ruleName"], where, deliberate))
                else:
                    findings.append(Finding(tool, violation["ruleName"], where, _first_clause(violation)))
        for violation in plugin.get("suppressedViolations", []):
            acknowledged.extend(
                Acknowledged(tool, violation["ruleName"], construct["constructPath"], violation["reason"])
                for construct in violation["violatingConstructs"]
            )
    return Synthesized(outdir, findings, acknowledged, reported)


def synthesize(config_dir: Path, environment: str, outdir: Path) -> Synthesized:
    """The environment's stacks under every cdk-nag pack."""
    app = nag_app(outdir)
    add_stacks(app, load_settings(config_dir, environment))
    synthesized = synth_and_report(app)
    # The report lists a plugin only when it found or was told to acknowledge something. Every stack here
    # has findings each pack acknowledges (CDK's default policies, at least): a pack missing did not run.
    if not set(NAG_PACKS) <= synthesized.reported:
        missing = ", ".join(sorted(set(NAG_PACKS) - synthesized.reported))
        raise RuntimeError(f"{outdir}: no report from {missing}: did the cdk-nag plugin run?")
    return synthesized


def _first_clause(violation: dict[str, Any]) -> str:
    """The description without the list of control IDs the compliance packs append."""
    return str(violation.get("description", "")).split(" - (Control IDs")[0]


def _pack_of(plugin_name: str) -> str:
    for pack in NAG_PACKS:
        if pack in plugin_name:
            return pack
    return plugin_name  # CDK's own "CloudFormation Validate"


def cfn_lint(templates: list[Path], region: str) -> list[Finding]:
    """Errors and warnings (informational matches are not findings). A template's own
    `Metadata.cfn-lint.config.ignore_checks` is honoured, as cfn-lint honours it."""
    from cfnlint.api import ManualArgs, lint_file  # type: ignore[import-untyped]  # cfn-lint ships no types

    findings: list[Finding] = []
    for path in templates:
        for match in lint_file(path, config=ManualArgs(regions=[region])):
            if match.rule.id.startswith(("E", "W")):
                where = f"{path.name}:{'/'.join(str(part) for part in match.path)}"
                findings.append(Finding("cfn-lint", match.rule.id, where, match.message))
    return findings


def cfn_lint_ignored(templates: list[Path]) -> list[Acknowledged]:
    """The rules each template, and each resource in it, ignores, with the reason sonic-deploy wrote beside
    them."""
    ignored: list[Acknowledged] = []
    for path in templates:
        template = json.loads(path.read_text())
        scopes = [(path.name, template.get("Metadata", {}))]
        scopes += [
            (f"{path.name}:{i}", r.get("Metadata", {})) for i, r in template.get("Resources", {}).items()
        ]
        for where, metadata in scopes:
            reasons = metadata.get(CFN_LINT_REASONS, {})
            for rule in metadata.get("cfn-lint", {}).get("config", {}).get("ignore_checks", []):
                ignored.append(Acknowledged("cfn-lint", rule, where, reasons.get(rule, "")))
    return ignored


def checkov(assembly: Path, executable: Path) -> tuple[list[Finding], list[Acknowledged]]:
    """checkov's CloudFormation checks over the assembly's templates, offline (no download of its external
    checks, no platform key). Its own skips (`Metadata.checkov.skip` on a resource) come back as skipped."""
    if not executable.is_file():
        raise FileNotFoundError(f"{executable}: checkov is not installed there. Fix: `make checkov`")
    command = [str(executable), "--directory", str(assembly), "--framework", "cloudformation"]
    command += ["--output", "json", "--compact", "--skip-download", "--soft-fail"]
    environ = {**os.environ, "BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false"}
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=CHECKOV_TIMEOUT_S, env=environ, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"checkov exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    output: Any = json.loads(done.stdout) if done.stdout.strip() else []
    # A report per framework that found files; with none, checkov prints only a summary (no "results"). A
    # template it cannot parse is listed, not failed: either way the gate would pass having read nothing.
    reports = [report for report in (output if isinstance(output, list) else [output]) if "results" in report]
    if not reports or not any(report.get("summary", {}).get("resource_count") for report in reports):
        raise RuntimeError(f"checkov read no CloudFormation resource in {assembly}")
    unparsed = [error for report in reports for error in report["results"].get("parsing_errors", [])]
    if unparsed:
        raise RuntimeError(f"checkov could not parse {', '.join(map(str, unparsed))}")
    findings: list[Finding] = []
    skipped: list[Acknowledged] = []
    for report in reports:
        results = report["results"]
        for check in results.get("failed_checks", []):
            where = f"{Path(check['file_path']).name}:{check['resource']}"
            findings.append(Finding("checkov", check["check_id"], where, check.get("check_name", "")))
        for check in results.get("skipped_checks", []):
            where = f"{Path(check['file_path']).name}:{check['resource']}"
            reason = (check.get("check_result") or {}).get("suppress_comment", "")
            skipped.append(Acknowledged("checkov", check["check_id"], where, reason))
    return findings, skipped
