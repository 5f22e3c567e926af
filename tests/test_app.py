"""The app as the CDK CLI runs it: same template as the tests see, and one clear error for bad config."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from aws_cdk.assertions import Template

from tests.cdk_context import ROOT

CDK = [str(ROOT / "node_modules" / "aws-cdk" / "bin" / "cdk")]


def _cdk(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        CDK_DISABLE_VERSION_CHECK="1", CDK_DISABLE_CLI_TELEMETRY="true", AWS_EC2_METADATA_DISABLED="true"
    )
    return subprocess.run(
        ["node", *CDK, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_cli_synth_matches_the_tests_template(tmp_path: Path, sagemaker_template: Template) -> None:
    result = _cdk("synth", "--quiet", "--no-notices", "--output", str(tmp_path))
    assert result.returncode == 0, result.stderr
    from_cli = json.loads((tmp_path / "SonicSageMaker.template.json").read_text())
    assert from_cli == sagemaker_template.to_json()


def test_cli_synth_with_unknown_environment_prints_one_error(tmp_path: Path) -> None:
    result = _cdk("synth", "--quiet", "--no-notices", "-c", "env=nope", "--output", str(tmp_path))
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert (
        f"sonic-deploy: {ROOT}/config/environments: env = 'nope': unknown environment. Fix: use one of dev, "
        "prod" in result.stderr
    )
