"""The command line prints a config error as one line on stderr, exit status 2, whatever the bad value holds."""

from __future__ import annotations

import pytest

from sonic_deploy.cli import main
from tests.conftest import EditConfig

DEV = "environments/dev.toml"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('project = "sonic-deploy"', '"line\\nbreak" = "x\\u2028y"'),
        ('region = "us-east-2"', 'region = "us-east-2\\r\\n\\u001b[2J"'),
        ("min_instances = 2", "min_instances = 1e308"),
    ],
)
def test_plan_prints_one_line(
    edit_config: EditConfig, capsys: pytest.CaptureFixture[str], old: str, new: str
) -> None:
    config = edit_config(DEV, old, new)
    assert main(["plan", "--env", "dev", "--config-dir", str(config)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"sonic-deploy plan: {config}/{DEV}: ") and captured.err.endswith("\n")
    assert captured.err[:-1].isprintable(), captured.err
