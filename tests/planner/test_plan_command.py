"""`sonic-deploy plan` end to end, on the shipped config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sonic_deploy.cli import main
from tests.cdk_context import ROOT

CONFIG = ["--config-dir", str(ROOT / "config")]


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["plan", *CONFIG, "--json", *args]) == 0
    result: dict[str, object] = json.loads(capsys.readouterr().out)
    return result


def test_plan_alone_prints_the_default_comparison_from_the_installed_package() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sonic_deploy.cli", "plan"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "Sonic capacity and cost plan: us-east-2, sonic-3"
    rows = [line.split() for line in lines if line.startswith(("sagemaker ", "ecs "))]
    assert [row[:2] for row in rows] == [
        ["sagemaker", "ml.g6e.xlarge"],
        ["ecs", "g6e.xlarge"],
        ["ecs", "g6e.xlarge"],
        ["ecs", "g6e.xlarge"],
        ["ecs", "g6.xlarge"],
        ["ecs", "g6.xlarge"],
        ["ecs", "g6.xlarge"],
    ]
    # 100 calls -> 40 streams: 8 L40S instances (8 streams each) or 14 L4 instances (4 each), as worked out in
    # test_plan_capacity; 8 x 2.61 = 20.88 an hour for SageMaker at the shipped price.
    assert rows[0][2:6] == ["8", "8", "/", "3"]
    assert rows[4][2:6] == ["4", "14", "/", "5"]
    assert "20.88*" in rows[0]
    assert any(line.startswith("Prices: ") and "days ago" in line for line in lines)


def test_json_matches_the_arithmetic(capsys: pytest.CaptureFixture[str]) -> None:
    plan = run_json(capsys, "--peak-calls", "200", "--instance-types", "g6e.xlarge")
    workload = plan["workload"]
    assert isinstance(workload, dict)
    assert workload["open_streams_at_peak"] == pytest.approx(80.0)  # 200 x 0.4
    rows = plan["rows"]
    assert isinstance(rows, list)
    assert [row["pricing"] for row in rows] == ["on-demand", "spot", "savings plan 1y"]
    # 80 / 6.4 = 12.5 -> 13 + 1 = 14 at peak; off-peak 50 calls -> 20 streams -> 3.125 -> 4 + 1 = 5.
    assert {(row["peak_instances"], row["offpeak_instances"]) for row in rows} == {(14, 5)}
    on_demand = rows[0]
    assert on_demand["usd_per_month"] == pytest.approx(sum(on_demand["monthly_breakdown"].values()))
    prices = plan["prices"]
    assert isinstance(prices, dict) and prices["unverified_rows_used"] > 0


def test_probe_figure_replaces_the_catalogue_for_the_probed_type(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    summary = tmp_path / "summary.json"
    levels = [
        {"concurrency": c, "requests": 100, "ok": 100, "errors": {}, "ttfa_ms": {"p95": p}}
        for c, p in ((4, 120.0), (6, 180.0), (10, 320.0))
    ]
    summary.write_text(json.dumps({"levels": levels}))
    plan = run_json(
        capsys, "--probe", str(summary), "--probe-instance-type", "ml.g6e.xlarge", "--ttfa-budget-ms", "250"
    )
    rows = plan["rows"]
    assert isinstance(rows, list)
    sagemaker, ecs = rows[0], rows[1]
    # 6 streams measured: 40 / (6 x 0.8) = 8.33 -> 9 serving, 10 in all; g6e.xlarge keeps the catalogue's 8.
    assert (sagemaker["streams_per_instance"], sagemaker["peak_instances"]) == (6, 10)
    assert sagemaker["streams_source"].startswith("probe: summary.json, TTFA p95 180 ms <= 250 ms")
    assert (ecs["streams_per_instance"], ecs["peak_instances"]) == (8, 8)


def test_plot_writes_a_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    chart = tmp_path / "plan.png"
    assert main(["plan", *CONFIG, "--plot", str(chart)]) == 0
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    capsys.readouterr()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--speaking-share", "2"],
            "command line: --speaking-share = 2.0: out of range. Fix: give the agent's",
        ),
        (
            ["--instance-types", "p5.48xlarge"],
            "--instance-types = 'p5.48xlarge': not in config/instance_types",
        ),
        (["--region", "ohio"], "command line: --region = 'ohio': not an AWS Region name"),
        (
            ["--probe", "x.json"],
            "--probe-instance-type = None: must name the instance type the probe measured",
        ),
        (["--plot", "plan.svg"], "--plot = 'plan.svg': not a .png file name"),
        (["--env", "staging"], "environments: env = 'staging': unknown environment"),
    ],
)
def test_bad_input_exits_2_with_field_value_and_fix(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["plan", *CONFIG, *args]) == 2
    error = capsys.readouterr().err
    assert message in error
    assert "Fix: " in error and "Traceback" not in error


def test_refresh_without_credentials_says_how_to_fix(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert main(["plan", *CONFIG, "--refresh-prices"]) == 1
    error = capsys.readouterr().err
    assert "could not fetch prices: Unable to locate credentials" in error
    assert "Fix: run with AWS credentials allowed pricing:GetProducts" in error


@pytest.mark.parametrize("command", [["plan"], ["preflight", "--env", "dev"]])
def test_outside_the_repository_the_config_folder_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str]
) -> None:
    assert main([*command, "--config-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"sonic-deploy: command line: --config-dir = '{tmp_path}': no environments/ folder there (not a "
        "sonic-deploy config/ folder). Fix: run from the repository root, or pass --config-dir "
        "PATH/TO/sonic-deploy/config\n"
    )
