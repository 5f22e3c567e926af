"""cdk-nag's AwsSolutions rules over both stacks: every finding is fixed or acknowledged with a reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aws_cdk import App, Validations
from cdk_nag import AwsSolutionsChecks

from sonic_deploy.config import load_settings
from sonic_deploy.stacks import add_stacks
from tests.cdk_context import cli_context


def _findings(config_dir: Path, outdir: Path) -> list[str]:
    app = App(context=cli_context(), outdir=str(outdir))
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    add_stacks(app, load_settings(config_dir, "dev"))
    try:
        app.synth()
    except RuntimeError as error:
        if "ValidationFailed" not in str(error):
            raise
    report = json.loads((outdir / "validation-report.json").read_text())
    return [
        f"{violation['ruleName']} at {construct['constructPath']}"
        for plugin in report["pluginReports"]
        for violation in plugin["violations"]
        for construct in violation["violatingConstructs"]
    ]


@pytest.mark.parametrize("licence_mode", ["connected", "air-gapped"])
def test_no_unacknowledged_findings(licence_mode: str, deployable_config: Path, tmp_path: Path) -> None:
    """What a deploy would use: the shipped config with its placeholders replaced (they are synth warnings,
    which the validation report lists too)."""
    if licence_mode == "air-gapped":
        dev = deployable_config / "environments/dev.toml"
        text = dev.read_text().replace('licence_mode = "connected"', 'licence_mode = "air-gapped"')
        dev.write_text(text.replace("nat_gateways = 1", "nat_gateways = 0"))
    assert _findings(deployable_config, tmp_path / "cdk.out") == []
