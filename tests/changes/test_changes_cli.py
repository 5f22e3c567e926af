"""`python -m sonic_deploy.changes`: diff against baselines, refresh them, resolve ENV/ROUTE; exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sonic_deploy.changes import find_stale_baselines
from sonic_deploy.changes.cli import EXIT_DANGEROUS, EXIT_OK, EXIT_USAGE, main
from sonic_deploy.config import environment_names
from tests.changes.assemblies import finish_synths
from tests.changes.narrow_config import config_with_sagemaker_only_environment

CONFIG = Path(__file__).resolve().parents[2] / "config"
KNOWN = ", ".join(environment_names(CONFIG))


def endpoint_stack(endpoint_name: str, tag: str = "a") -> dict[str, Any]:
    return {
        "Resources": {
            "Endpoint": {
                "Type": "AWS::SageMaker::Endpoint",
                "Properties": {
                    "EndpointName": endpoint_name,
                    "EndpointConfigName": "cfg",
                    "Tags": [{"Key": "team", "Value": tag}],
                },
            }
        }
    }


def write(path: Path, template: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(template, indent=1), encoding="utf-8")
    return path


def run(tmp_path: Path, command: str, *args: str) -> int:
    """The CLI on the repository's config; diff and baseline read tmp_path/synth (stamped as a successful
    synth of that config) and tmp_path/baselines."""
    finish_synths(tmp_path / "synth", config=CONFIG)
    locations = ["--synthesized", str(tmp_path / "synth"), "--baselines", str(tmp_path / "baselines")]
    return main(
        ["--config", str(CONFIG), command, *(locations if command in ("diff", "baseline") else []), *args]
    )


def test_endpoint_replacement_fails_the_diff(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "baselines/dev/SonicSageMaker.template.json", endpoint_stack("sonic-dev"))
    write(tmp_path / "synth/dev/SonicSageMaker.template.json", endpoint_stack("sonic-dev-renamed"))
    summary = tmp_path / "summary.md"

    assert run(tmp_path, "diff", "--env", "dev", "--markdown", str(summary)) == EXIT_DANGEROUS

    out = capsys.readouterr().out
    assert "!!replaced Endpoint  AWS::SageMaker::Endpoint" in out
    assert "DANGEROUS: the endpoint clients call" in out
    assert "EndpointName is create-only" in out
    assert "Dangerous changes: dev/SonicSageMaker/Endpoint" in out
    markdown = summary.read_text(encoding="utf-8")
    assert "| :no_entry: | replaced | `Endpoint` | `AWS::SageMaker::Endpoint` |" in markdown


def test_allowed_dangerous_changes_exit_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "baselines/dev/SonicSageMaker.template.json", endpoint_stack("sonic-dev"))
    write(tmp_path / "synth/dev/SonicSageMaker.template.json", endpoint_stack("sonic-dev-renamed"))
    assert run(tmp_path, "diff", "--env", "dev", "--allow-dangerous") == EXIT_OK
    assert "Dangerous changes, explicitly allowed: dev/SonicSageMaker/Endpoint." in capsys.readouterr().out


def test_tag_change_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "baselines/dev/SonicSageMaker.template.json", endpoint_stack("sonic-dev", tag="a"))
    write(tmp_path / "synth/dev/SonicSageMaker.template.json", endpoint_stack("sonic-dev", tag="b"))
    assert run(tmp_path, "diff", "--env", "dev") == EXIT_OK
    out = capsys.readouterr().out
    assert "changed  Endpoint  AWS::SageMaker::Endpoint" in out
    assert "No dangerous changes." in out


def test_missing_baseline_counts_everything_as_added(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path / "synth/dev/SonicSageMaker.template.json", endpoint_stack("sonic-dev"))
    assert run(tmp_path, "diff", "--env", "dev") == EXIT_OK
    out = capsys.readouterr().out
    assert "no baseline yet" in out and "make baseline ENV=dev" in out


def test_a_stack_no_longer_synthesized_is_removed_and_dangerous(tmp_path: Path) -> None:
    write(
        tmp_path / "baselines/dev/SonicEcs.template.json",
        {"Resources": {"Service": {"Type": "AWS::ECS::Service", "Properties": {"Cluster": "c"}}}},
    )
    write(tmp_path / "synth/dev/SonicSageMaker.template.json", endpoint_stack("sonic-dev"))
    assert run(tmp_path, "diff", "--env", "dev") == EXIT_DANGEROUS
    assert run(tmp_path, "diff", "--env", "dev", "--route", "sagemaker") == EXIT_OK


def test_nothing_synthesized_is_a_usage_error_naming_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(tmp_path, "diff", "--env", "dev") == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("error: no synthesized sonic stacks in ")
    assert "make diff ENV=dev" in err and "Traceback" not in err


def test_unknown_environment_lists_the_known_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(tmp_path, "diff", "--env", "staging") == EXIT_USAGE
    assert f"ENV=staging is not an environment: use one of {KNOWN}" in capsys.readouterr().err


def test_baseline_refresh_makes_the_baselines_current(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    synthesized = endpoint_stack("sonic-dev")
    write(tmp_path / "synth/dev/SonicSageMaker.template.json", synthesized)
    write(tmp_path / "baselines/dev/SonicEcs.template.json", {"Resources": {}})
    baselines = tmp_path / "baselines"

    stale = find_stale_baselines({"SonicSageMaker": synthesized}, environment="dev", baselines_dir=baselines)
    assert [m.split(" ")[0].split("/")[-1] for m in stale] == [
        "SonicSageMaker.template.json",
        "SonicEcs.template.json",
    ]
    assert all("make baseline ENV=dev" in message for message in stale)

    assert run(tmp_path, "baseline", "--env", "dev") == EXIT_OK
    assert "removed" in capsys.readouterr().out
    assert (
        find_stale_baselines({"SonicSageMaker": synthesized}, environment="dev", baselines_dir=baselines)
        == []
    )
    assert not (baselines / "dev/SonicEcs.template.json").exists()


def test_stale_baseline_check_ignores_version_reporting_and_metadata(tmp_path: Path) -> None:
    committed = endpoint_stack("sonic-dev")
    committed["Resources"]["CDKMetadata"] = {
        "Type": "AWS::CDK::Metadata",
        "Properties": {"Analytics": "v2:old"},
    }
    committed["Conditions"] = {"CDKMetadataAvailable": {"Fn::Equals": ["a", "a"]}}
    committed["Resources"]["Endpoint"]["Metadata"] = {"aws:cdk:path": "SonicSageMaker/Sonic/Endpoint"}
    write(tmp_path / "dev/SonicSageMaker.template.json", committed)
    fresh = endpoint_stack("sonic-dev")
    assert find_stale_baselines({"SonicSageMaker": fresh}, environment="dev", baselines_dir=tmp_path) == []
    fresh["Resources"]["Endpoint"]["Properties"]["EndpointConfigName"] = "cfg-2"
    [message] = find_stale_baselines({"SonicSageMaker": fresh}, environment="dev", baselines_dir=tmp_path)
    assert "differs from the synthesized SonicSageMaker template" in message
    assert "make baseline ENV=dev" in message


@pytest.mark.parametrize(
    ("env", "route", "expected"),
    [
        ("", "sagemaker", "ENV is not set"),
        ("dev", "", "ROUTE is not set. Environment dev deploys: "),
        ("dev", "lambda", "ROUTE=lambda is not a route: use one of sagemaker, ecs"),
    ],
)
def test_target_rejects_wrong_env_or_route(
    env: str, route: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(tmp_path, "target", "--env", env, "--route", route) == EXIT_USAGE
    assert expected in capsys.readouterr().err


def test_target_rejects_a_route_the_environment_does_not_deploy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_with_sagemaker_only_environment(tmp_path)
    assert main(["--config", str(config), "target", "--env", "onlysm", "--route", "ecs"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "environment onlysm does not deploy the ecs route (its routes are sagemaker" in err
    assert "ENV=onlysm ROUTE=sagemaker" in err


def test_target_prints_the_stack_facts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(tmp_path, "target", "--env", "dev", "--route", "sagemaker") == EXIT_OK
    facts = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert facts["stack_id"] == "SonicSageMaker"
    assert facts["stack_name"] == "sonic-dev-sagemaker"
    assert facts["region"] == "us-east-2"


def test_environments_lists_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(tmp_path, "environments", "--json") == EXIT_OK
    assert json.loads(capsys.readouterr().out) == sorted(
        p.stem for p in (CONFIG / "environments").glob("*.toml")
    )


def test_a_baseline_is_current_whatever_the_asset_hashes_but_not_whatever_the_template(
    tmp_path: Path,
) -> None:
    """The probe image's asset hash follows every change to sonic_deploy/: the baseline ignores it, not the
    rest of the value that holds it."""
    old, new = "a" * 64, "b" * 64

    def with_image(tag: str, memory: int = 2048) -> dict[str, Any]:
        template = endpoint_stack("sonic-dev")
        template["Resources"]["Probe"] = {
            "Type": "AWS::ECS::TaskDefinition",
            "Properties": {
                "Image": f"123456789012.dkr.ecr.us-east-2.amazonaws.com/probe:{tag}",
                "Memory": memory,
            },
        }
        return template

    write(tmp_path / "baselines/dev/SonicSageMaker.template.json", with_image(old))
    baselines = tmp_path / "baselines"
    assert (
        find_stale_baselines({"SonicSageMaker": with_image(new)}, environment="dev", baselines_dir=baselines)
        == []
    )
    assert find_stale_baselines(
        {"SonicSageMaker": with_image(new, memory=4096)}, environment="dev", baselines_dir=baselines
    )
    assert find_stale_baselines(
        {"SonicSageMaker": with_image(new[:63])}, environment="dev", baselines_dir=baselines
    )
