"""Each scanner finds what it should, and each kind of acknowledgement silences exactly its finding: the gate
cannot pass by reading nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import Annotations, Stack
from aws_cdk import aws_logs as logs

from sonic_deploy.compliance.__main__ import DEFAULT_CHECKOV
from sonic_deploy.compliance.gate import VariantResult, table
from sonic_deploy.compliance.scan import (
    Acknowledged,
    Finding,
    cfn_lint,
    cfn_lint_ignored,
    checkov,
    nag_app,
    synth_and_report,
)
from sonic_deploy.compliance.variants import Variant
from sonic_deploy.constructs.findings import acknowledge_compliance, ignore_cfn_lint, skip_checkov

UNENCRYPTED_LOG_GROUP = {"Type": "AWS::Logs::LogGroup", "Properties": {"RetentionInDays": 7}}


def _nag_findings(tmp_path: Path, *, acknowledged: bool) -> tuple[set[str], set[tuple[str, str]]]:
    app = nag_app(tmp_path / "cdk.out")
    stack = Stack(app, "Probe")
    group = logs.LogGroup(stack, "Logs", retention=logs.RetentionDays.ONE_WEEK)
    if acknowledged:
        acknowledge_compliance(group, "CloudWatchLogGroupEncrypted", reason="a test of the acknowledgement")
    result = synth_and_report(app)
    rules = {
        f"{finding.tool} {finding.rule}"
        for finding in result.findings
        if finding.where == "Probe/Logs/Resource"
    }
    acks = {(ack.rule, ack.reason) for ack in result.acknowledged if ack.where == "Probe/Logs/Resource"}
    return rules, acks


def test_the_compliance_packs_find_an_unencrypted_log_group_and_take_its_acknowledgement(
    tmp_path: Path,
) -> None:
    found, _ = _nag_findings(tmp_path / "plain", acknowledged=False)
    assert {
        "NIST.800.53.R5 NIST.800.53.R5-CloudWatchLogGroupEncrypted",
        "HIPAA.Security HIPAA.Security-CloudWatchLogGroupEncrypted",
        "PCI.DSS.321 PCI.DSS.321-CloudWatchLogGroupEncrypted",
    } <= found
    found, acks = _nag_findings(tmp_path / "acknowledged", acknowledged=True)
    assert not any("CloudWatchLogGroupEncrypted" in rule for rule in found)
    assert ("NIST.800.53.R5-CloudWatchLogGroupEncrypted", "a test of the acknowledgement") in acks


def test_the_plain_listener_warning_is_recorded_with_its_reason_and_others_stay_findings(
    tmp_path: Path,
) -> None:
    app = nag_app(tmp_path / "cdk.out")
    stack = Stack(app, "Probe")
    Annotations.of(stack).add_warning_v2("sonic-deploy:plaintext-listener", "plain TCP listener")
    Annotations.of(stack).add_warning_v2("sonic-deploy:other", "another warning")
    result = synth_and_report(app)
    warnings = {(f.rule, f.where) for f in result.findings if f.tool == "Construct Annotations"}
    assert warnings == {("Annotation::sonic-deploy:other", "Probe")}
    (plain,) = [ack for ack in result.acknowledged if ack.tool == "Construct Annotations"]
    assert plain.rule == "Annotation::sonic-deploy:plaintext-listener" and "allow_plaintext" in plain.reason


def test_checkov_fails_an_unencrypted_log_group_and_honours_a_skip_on_it(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "Probe.template.json").write_text(json.dumps({"Resources": {"Logs": UNENCRYPTED_LOG_GROUP}}))
    failed, skipped = checkov(plain, DEFAULT_CHECKOV)
    assert [finding.rule for finding in failed] == ["CKV_AWS_158"]
    assert skipped == []

    app = nag_app(tmp_path / "cdk.out")
    group = logs.LogGroup(Stack(app, "Probe"), "Logs", retention=logs.RetentionDays.ONE_WEEK)
    skip_checkov(group, "CKV_AWS_158", reason="a test of the skip")
    assembly = synth_and_report(app).assembly
    failed, skipped = checkov(assembly, DEFAULT_CHECKOV)
    assert failed == []
    assert [(ack.rule, ack.reason) for ack in skipped] == [("CKV_AWS_158", "a test of the skip")]


def test_cfn_lint_warns_of_a_hardcoded_zone_unless_the_template_ignores_the_rule(tmp_path: Path) -> None:
    subnet = {
        "Type": "AWS::EC2::Subnet",
        "Properties": {
            "VpcId": "vpc-0123456789abcdef0",
            "CidrBlock": "10.0.0.0/24",
            "AvailabilityZone": "us-east-2a",
        },
    }
    plain = tmp_path / "Plain.template.json"
    plain.write_text(json.dumps({"Resources": {"Subnet": subnet}}))
    assert [finding.rule for finding in cfn_lint([plain], "us-east-2")] == ["W3010"]

    app = nag_app(tmp_path / "cdk.out")
    stack = Stack(app, "Probe")
    ignore_cfn_lint(stack, "W3010", reason="a test of the ignore")
    stack.template_options.metadata = {**(stack.template_options.metadata or {})}
    ignored = tmp_path / "Ignored.template.json"
    metadata = stack.template_options.metadata
    ignored.write_text(json.dumps({"Metadata": metadata, "Resources": {"Subnet": subnet}}))
    assert cfn_lint([ignored], "us-east-2") == []
    assert [(ack.rule, ack.reason) for ack in cfn_lint_ignored([ignored])] == [
        ("W3010", "a test of the ignore")
    ]


def test_checkov_reading_nothing_is_an_error_not_a_pass(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RuntimeError, match="read no CloudFormation resource"):
        checkov(empty, DEFAULT_CHECKOV)
    broken = tmp_path / "broken"
    broken.mkdir()
    text = json.dumps(
        {"AWSTemplateFormatVersion": "2010-09-09", "Resources": {"Logs": UNENCRYPTED_LOG_GROUP}}
    )
    (broken / "Broken.template.json").write_text(text[:-3])
    (broken / "Fine.template.json").write_text(json.dumps({"Resources": {"Logs": UNENCRYPTED_LOG_GROUP}}))
    with pytest.raises(RuntimeError, match="could not parse"):
        checkov(broken, DEFAULT_CHECKOV)


def test_the_table_counts_each_variant_on_its_own() -> None:
    dev = VariantResult(Variant("dev"), [Finding("checkov", "CKV_AWS_1", "a")], [])
    dev.acknowledged.append(Acknowledged("cfn-lint", "W3005", "t:Fn", "why"))
    prod = VariantResult(Variant("prod"), [], [Acknowledged("AwsSolutions", "AwsSolutions-S1", "b", "why")])
    rows = {line.split(" | ")[0].strip("| "): line for line in table([dev, prod]).splitlines()[2:]}
    assert rows["checkov (CloudFormation)"] == "| checkov (CloudFormation) | 1 | 0 |"
    assert rows["cfn-lint"] == "| cfn-lint | 0 (rules ignored: W3005) | 0 |"
    assert rows["cdk-nag AwsSolutions"] == "| cdk-nag AwsSolutions | 0 | 0 (+1 acknowledged) |"
