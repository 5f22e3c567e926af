"""A copy of config/ with one more environment that deploys only the SageMaker route, so that tests of
"this environment does not deploy that route" do not depend on what the committed environments deploy."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

REPO_CONFIG = Path(__file__).resolve().parents[2] / "config"
SAGEMAKER_ONLY = "onlysm"


def config_with_sagemaker_only_environment(tmp_path: Path) -> Path:
    config = tmp_path / "config"
    shutil.copytree(REPO_CONFIG, config)
    prod = (config / "environments/prod.toml").read_text(encoding="utf-8")
    narrowed = re.sub(r"(?m)^routes = .*$", 'routes = ["sagemaker"]', prod)
    (config / "environments" / f"{SAGEMAKER_ONLY}.toml").write_text(narrowed, encoding="utf-8")
    return config
