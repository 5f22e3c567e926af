"""`sonic-deploy plan` end to end, on the shipped config."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sonic_deploy.cli import main
from tests.cdk_context import ROOT
from tests.conftest import EditConfig

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
    rows = [line.split() for line in lines if line.startswith(("sagemaker ", "ecs ", "eks "))]
    assert [row[:2] for row in rows] == [
        ["sagemaker", "ml.g6e.xlarge"],
        ["ecs", "g6e.xlarge"],
        ["ecs", "g6e.xlarge"],
        ["ecs", "g6e.xlarge"],
        ["eks", "g6e.xlarge"],
        ["ecs", "g6.xlarge"],
        ["ecs", "g6.xlarge"],
        ["ecs", "g6.xlarge"],
        ["eks", "g6.xlarge"],
    ]
    # 100 calls -> 40 streams: 8 L40S instances (8 streams each) or 14 L4 instances (4 each), as worked out in
    # test_plan_capacity, on ECS and EKS alike; 8 x 2.61 = 20.88 an hour for SageMaker at the shipped price.
    assert rows[0][2:6] == ["8", "8", "/", "3"]
    assert rows[4][2:6] == ["8", "8", "/", "3"]
    assert rows[5][2:6] == rows[8][2:6] == ["4", "14", "/", "5"]
    assert "20.88*" in rows[0]
    assert any(line.startswith("Prices: ") and "days ago" in line for line in lines)


def test_json_matches_the_arithmetic(capsys: pytest.CaptureFixture[str]) -> None:
    plan = run_json(capsys, "--peak-calls", "200", "--instance-types", "g6e.xlarge")
    workload = plan["workload"]
    assert isinstance(workload, dict)
    assert workload["open_streams_at_peak"] == pytest.approx(80.0)  # 200 x 0.4
    rows = plan["rows"]
    assert isinstance(rows, list)
    assert [(row["route"], row["pricing"]) for row in rows] == [
        ("ecs", "on-demand"),
        ("ecs", "spot"),
        ("ecs", "savings plan 1y"),
        ("eks", "on-demand"),
    ]
    # 80 / 6.4 = 12.5 -> 13 + 1 = 14 at peak; off-peak 50 calls -> 20 streams -> 3.125 -> 4 + 1 = 5.
    assert {(row["peak_instances"], row["offpeak_instances"]) for row in rows} == {(14, 5)}
    on_demand = rows[0]
    assert on_demand["usd_per_month"] == pytest.approx(sum(on_demand["monthly_breakdown"].values()))
    prices = plan["prices"]
    assert isinstance(prices, dict) and prices["unverified_rows_used"] > 0


def probe_summary(tmp_path: Path) -> Path:
    """A probe summary of one ml.g6e.xlarge: p95 within 250 ms up to 6 streams, not at 10."""
    summary = tmp_path / "summary.json"
    levels = [
        {
            "concurrency": c,
            "rate": None,
            "requests": 100,
            "ok": 100,
            "errors": {},
            "ttfa_ms": {"p50": p / 2, "p95": p, "p99": p},
        }
        for c, p in ((4, 120.0), (6, 180.0), (10, 320.0))
    ]
    summary.write_text(json.dumps({"levels": levels}))
    return summary


def test_probe_figure_replaces_the_catalogue_for_the_probed_type(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    summary = probe_summary(tmp_path)
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


def test_an_slo_search_s_answer_replaces_the_catalogue_and_says_where_it_came_from(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    summary = probe_summary(tmp_path)
    body = json.loads(summary.read_text())
    slo = {
        "spec": "ttfa_p95<=200ms,errors<=0%",
        "finished": True,
        "max_concurrency": 6,
        "bounded_by_max": False,
    }
    summary.write_text(json.dumps({**body, "slo": slo}))
    # --ttfa-budget-ms 100 alone would refuse every level (p95 120 ms at 4): the search's answer is used.
    args = ["--probe", str(summary), "--probe-instance-type", "ml.g6e.xlarge", "--ttfa-budget-ms", "100"]
    plan = run_json(capsys, *args)
    rows = plan["rows"]
    assert isinstance(rows, list)
    assert (rows[0]["streams_per_instance"], rows[0]["peak_instances"]) == (6, 10)
    assert rows[0]["streams_source"] == (
        "probe: summary.json, SLO search ttfa_p95<=200ms,errors<=0%: highest concurrency meeting it, "
        "TTFA p95 180 ms; --ttfa-budget-ms not applied"
    )


def test_table_shows_the_figure_used_its_source_and_the_contradicting_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["plan", *CONFIG]) == 0
    out = capsys.readouterr().out
    section = out[out.index("Streams per instance:\n") :].splitlines()
    assert section[1:6] == [
        "  ml.g6e.xlarge: 8, catalogue (sonic-3, per ml.g6e.xlarge: Cartesia's Sonic 3 SageMaker listing README "
        "(cartesia-ai/cartesia-aws): 8 concurrent requests per ml.g6e.xlarge)",
        '    contradicted by: 4 (the same README\'s 429 section: "at most 4 concurrent generation requests")',
        "  g6e.xlarge: 8, catalogue (sonic-3, 1 x L40S at 8 per GPU: Cartesia self-hosted docs, newest page "
        "(Sonic version not stated): L40S 8 concurrent)",
        "    contradicted by: 4 (1 x L40S at 4 per GPU: Cartesia self-hosted docs, older page: L40S 4 concurrent)",
        "  g6.xlarge: 4, catalogue (sonic-3, 1 x L4 at 4 per GPU: not published by Cartesia; assumed equal to "
        "A10G (4), the other 24 GB GPU they list)",
    ]
    assert section[6].startswith(
        "Streams per instance for ml.g6e.xlarge, g6e.xlarge, g6.xlarge are published"
    )
    assert "then `sonic-deploy plan --probe OUT/summary.json --probe-instance-type TYPE`" in section[6]


def test_json_carries_each_type_s_figure_source_and_contradictions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    plan = run_json(capsys, "--instance-types", "ml.g6e.xlarge")
    assert plan["streams_per_instance"] == {
        "ml.g6e.xlarge": {
            "streams": 8,
            "basis": "catalogue",
            "source": "sonic-3, per ml.g6e.xlarge: Cartesia's Sonic 3 SageMaker listing README "
            "(cartesia-ai/cartesia-aws): 8 concurrent requests per ml.g6e.xlarge",
            "replaces": [],
            "contradicted_by": [
                {
                    "streams": 4,
                    "source": 'the same README\'s 429 section: "at most 4 concurrent generation requests"',
                }
            ],
        }
    }
    notes = plan["notes"]
    assert isinstance(notes, list) and notes[0].startswith(
        "Streams per instance for ml.g6e.xlarge are published"
    )


def test_measured_figure_replaces_the_catalogue_in_the_table(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    summary = probe_summary(tmp_path)
    args = ["--probe", str(summary), "--probe-instance-type", "ml.g6e.xlarge", "--ttfa-budget-ms", "250"]
    assert main(["plan", *CONFIG, "--instance-types", "ml.g6e.xlarge", *args]) == 0
    lines = capsys.readouterr().out.splitlines()
    section = lines[lines.index("Streams per instance:") + 1 :]
    assert section[:4] == [
        "  ml.g6e.xlarge: 6, measured (probe: summary.json, TTFA p95 180 ms <= 250 ms)",
        "    replaces catalogue: 8 (sonic-3, per ml.g6e.xlarge: Cartesia's Sonic 3 SageMaker listing README "
        "(cartesia-ai/cartesia-aws): 8 concurrent requests per ml.g6e.xlarge)",
        '    contradicted by: 4 (the same README\'s 429 section: "at most 4 concurrent generation requests")',
        "The SageMaker scaling of environment dev still targets 8 streams per ml.g6e.xlarge, not the measured 6: "
        "set `streams_per_instance = 6` under [sagemaker] in config/environments/dev.toml to deploy with it.",
    ]
    row = next(line.split() for line in lines if line.startswith("sagemaker "))
    assert row[2:6] == ["6", "10", "/", "4"]  # 40 / (6 x 0.8) = 8.33 -> 9 + 1; 10 / 4.8 = 2.08 -> 3 + 1


def test_configured_figure_is_shown_as_configured(
    capsys: pytest.CaptureFixture[str], edit_config: EditConfig
) -> None:
    config = edit_config(
        "environments/dev.toml",
        "target_utilisation = 0.8\n",
        "target_utilisation = 0.8\nstreams_per_instance = 4\n",
    )
    assert main(["plan", "--config-dir", str(config), "--instance-types", "ml.g6e.xlarge"]) == 0
    lines = capsys.readouterr().out.splitlines()
    section = lines[lines.index("Streams per instance:") + 1 :]
    assert section[0] == "  ml.g6e.xlarge: 4, configured (environment dev: sagemaker.streams_per_instance)"
    assert section[1].startswith("    replaces catalogue: 8 (sonic-3, per ml.g6e.xlarge: ")
    assert section[2].startswith("    contradicted by: 4 (the same README's 429 section")


def test_plan_uses_the_environment_s_sonic_version(
    capsys: pytest.CaptureFixture[str], edit_config: EditConfig
) -> None:
    edit_config("environments/dev.toml", 'sonic_version = "sonic-3"', 'sonic_version = "sonic-3.6"')
    config = edit_config(
        "model_packages.toml",
        "",
        '\n[versions."sonic-3.6"]\nus-east-2 = "arn:aws:sagemaker:us-east-2:123456789012:model-package/Sonic36"\n',
    )
    assert main(["plan", "--config-dir", str(config), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["sonic_version"] == "sonic-3.6"
    figure = plan["streams_per_instance"]["ml.g6e.xlarge"]
    assert (figure["streams"], [alt["streams"] for alt in figure["contradicted_by"]]) == (10, [4])
    assert figure["source"].startswith("sonic-3.6, per ml.g6e.xlarge: Cartesia's Sonic 3.6 SageMaker listing")
    sagemaker = plan["rows"][0]
    # 40 / (10 x 0.8) = 5 serving + 1 spare.
    assert (sagemaker["streams_per_instance"], sagemaker["peak_instances"]) == (10, 6)
    assert plan["streams_per_instance"]["g6e.xlarge"]["streams"] == 8  # self-hosted L40S: unchanged


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
            "plan: --speaking-share '2': out of range. Fix: give a share, more than 0 up to 1",
        ),
        (
            ["--instance-types", "p5.48xlarge"],
            "--instance-types 'p5.48xlarge': not in config/instance_types",
        ),
        (["--region", "ohio"], "plan: --region 'ohio': not an AWS Region name. Fix: give an AWS Region"),
        (["--region", "us-east-2\n"], "plan: --region 'us-east-2\\n': not an AWS Region"),
        (["--probe", "x.json"], "plan: --probe 'x.json': cannot read it (No such file or directory)"),
        (["--plot", "plan.svg"], "sonic-deploy plan: --plot 'plan.svg': not a .png file name"),
        (["--env", "staging"], "environments: env = 'staging': unknown environment"),
    ],
)
def test_bad_input_exits_2_with_field_value_and_fix(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    try:
        code = main(["plan", *CONFIG, *args])
    except SystemExit as stopped:  # argparse's own checks
        code = int(stopped.code or 0)
    assert code == 2
    (error,) = capsys.readouterr().err.splitlines()
    assert message in error
    assert "Fix: " in error


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
    with pytest.raises(SystemExit) as stopped:
        main([*command, "--config-dir", str(tmp_path)])
    assert stopped.value.code == 2
    assert capsys.readouterr().err == (
        f"sonic-deploy {command[0]}: --config-dir '{tmp_path}': no environments/ folder in it. Fix: run from the "
        "repository root, or give the path of sonic-deploy's config/ folder\n"
    )


def test_run_elsewhere_the_default_config_folder_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        main(["plan"])
    assert stopped.value.code == 2
    assert "--config-dir 'config': no such folder" in capsys.readouterr().err


def test_the_fallback_types_are_priced_beside_the_first(
    capsys: pytest.CaptureFixture[str], edit_config: EditConfig
) -> None:
    types = 'instance_types = ["ml.g6e.xlarge"]\nsource = "Cartesia docs'
    edit_config("instance_types.toml", types, types.replace('"]', '", "ml.g6e.2xlarge"]'))
    config = edit_config(
        "environments/dev.toml", "", '\n[sagemaker.capacity]\nfallback_types = ["ml.g6e.2xlarge"]\n'
    )
    assert main(["plan", "--config-dir", str(config), "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [row["instance_type"] for row in plan["rows"]][:1] == ["ml.g6e.xlarge"]
    assert "ml.g6e.2xlarge" in [row["instance_type"] for row in plan["rows"]]
    assert plan["streams_per_instance"]["ml.g6e.2xlarge"]["streams"] == 8  # 1 x L40S at 8 (sonic-3)


def test_a_reservation_is_named_in_the_notes(
    capsys: pytest.CaptureFixture[str], edit_config: EditConfig
) -> None:
    plan = "arn:aws:sagemaker:us-east-2:123456789012:training-plan/sonic-endpoints"
    config = edit_config(
        "environments/dev.toml", "", f'\n[sagemaker.capacity]\nml_reservation_arn = "{plan}"\n'
    )
    assert main(["plan", "--config-dir", str(config), "--json"]) == 0
    (note,) = [n for n in json.loads(capsys.readouterr().out)["notes"] if "ml_reservation_arn" in n]
    assert "only from the training plan sonic-endpoints, paid up front" in note


def eks_rows(plan: dict[str, object]) -> dict[str, dict[str, object]]:
    rows = plan["rows"]
    assert isinstance(rows, list)
    return {row["instance_type"]: row for row in rows if row["route"] == "eks"}


def test_each_one_gpu_type_has_an_eks_row_with_the_ecs_row_s_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    plan = run_json(
        capsys, "--env", "dev-eks", "--instance-types", "ml.g6e.xlarge", "g6e.xlarge", "g6.xlarge"
    )
    rows = plan["rows"]
    assert isinstance(rows, list)
    assert [(row["route"], row["instance_type"]) for row in rows if row["pricing"] == "on-demand"] == [
        ("ecs", "g6e.xlarge"),
        ("eks", "g6e.xlarge"),
        ("ecs", "g6.xlarge"),
        ("eks", "g6.xlarge"),
    ]
    ecs = {
        row["instance_type"]: row for row in rows if (row["route"], row["pricing"]) == ("ecs", "on-demand")
    }
    for instance_type, eks in eks_rows(plan).items():
        gpus = ("peak_instances", "offpeak_instances")
        assert [eks[key] for key in gpus] == [ecs[instance_type][key] for key in gpus]
        breakdown = eks["monthly_breakdown"]
        assert isinstance(breakdown, dict)
        # dev-eks makes its cluster: 730 h x 0.10 (prices.toml, standard support), 2 x m7i.xlarge at 0.2016.
        assert breakdown["EKS control plane (standard support)"] == pytest.approx(73.0)
        assert breakdown["system nodes (2 x m7i.xlarge)"] == pytest.approx(2 * 0.2016 * 730)
        assert {"instances", "NAT gateway", "NLB", "CloudWatch"} <= set(breakdown)
        assert eks["usd_per_month"] == pytest.approx(sum(breakdown.values()))
        assert eks["missing_prices"] == []
    notes = plan["notes"]
    assert isinstance(notes, list)
    (note,) = [note for note in notes if note.startswith("EKS rows")]
    assert "environment dev-eks's [eks.cluster]" in note
    assert "extended support costs more per cluster-hour, not priced here" in note


def test_a_multi_gpu_type_has_no_eks_row(capsys: pytest.CaptureFixture[str], edit_config: EditConfig) -> None:
    # The shipped catalogue has one-GPU types only: a 4 x L4 type added for the test (EKS refuses it, ECS plans it).
    four_gpus = '\n[instance_types."g6.12xlarge"]\nlocal_storage = true\ngpus = 4\ngpu = "L4"\nvcpus = 48\nmemory_gib = 192\n'
    config = edit_config("instance_types.toml", "", four_gpus)
    args = ["plan", "--config-dir", str(config), "--json", "--instance-types", "g6.xlarge", "g6.12xlarge"]
    assert main(args) == 0
    plan = json.loads(capsys.readouterr().out)
    assert list(eks_rows(plan)) == ["g6.xlarge"]
    assert {row["instance_type"] for row in plan["rows"] if row["route"] == "ecs"} == {
        "g6.xlarge",
        "g6.12xlarge",
    }


def test_an_environment_without_eks_prices_the_model_s_default_system_nodes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    (row,) = eks_rows(run_json(capsys, "--instance-types", "g6e.xlarge")).values()
    breakdown = row["monthly_breakdown"]
    assert isinstance(breakdown, dict)
    assert breakdown["system nodes (2 x m7i.xlarge)"] == pytest.approx(2 * 0.2016 * 730)


def test_an_existing_cluster_has_no_control_plane_charge(
    capsys: pytest.CaptureFixture[str], edit_config: EditConfig
) -> None:
    # dev-eks's commented example of an existing cluster, in its existing VPC (which the config requires).
    edit_config(
        "environments/dev-eks.toml",
        '# existing = "my-cluster"',
        'existing = "my-cluster"\nsecurity_group_id = "sg-0123456789abcdef0"',
    )
    config = edit_config("environments/dev-eks.toml", "# [network.existing_vpc]", "[network.existing_vpc]")
    for key in ("vpc_id", "vpc_cidr", "private_subnet_ids", "availability_zones", "private_route_table_ids"):
        edit_config("environments/dev-eks.toml", f"# {key} = ", f"{key} = ")
    args = [
        "plan",
        "--config-dir",
        str(config),
        "--env",
        "dev-eks",
        "--instance-types",
        "g6e.xlarge",
        "--json",
    ]
    assert main(args) == 0
    plan = json.loads(capsys.readouterr().out)
    (row,) = eks_rows(plan).values()
    breakdown = row["monthly_breakdown"]
    assert isinstance(breakdown, dict)
    assert breakdown["EKS control plane (existing cluster my-cluster: not charged here)"] == 0.0
    assert breakdown["system nodes (2 x m7i.xlarge)"] > 0  # the stack adds them on your cluster too
    assert "EKS control plane (standard support)" not in breakdown
    (note,) = [note for note in plan["notes"] if note.startswith("EKS rows")]
    assert "existing = 'my-cluster'" in note
