"""`sonic-deploy preflight --before-deploy ROUTE` (what `make deploy` runs first): Docker, then for ECS the
secrets, with Secrets Manager answered by botocore's Stubber in its real response shapes."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

import boto3
from botocore.stub import Stubber

from sonic_deploy.config import load_settings
from sonic_deploy.preflight.before_deploy import before_deploy, check_docker


def _docker(tmp_path: Path, body: str) -> str:
    script = tmp_path / "docker.py"
    script.write_text(body, encoding="utf-8")
    return f"{sys.executable} {script}"


def test_docker_that_answers_passes(tmp_path: Path) -> None:
    result = check_docker(_docker(tmp_path, "import sys; assert sys.argv[1] == 'info'; print('27.3.1')"))
    assert (result.status, result.detail) == ("pass", "server 27.3.1")


def test_docker_whose_daemon_is_down_fails_with_its_words(tmp_path: Path) -> None:
    docker = _docker(
        tmp_path, "import sys; print('Cannot connect to the Docker daemon', file=sys.stderr); sys.exit(1)"
    )
    result = check_docker(docker)
    assert result.status == "fail"
    assert result.detail == f"`{docker} info` failed: Cannot connect to the Docker daemon"
    assert result.fix.startswith("start Docker")


def test_no_docker_command_fails(tmp_path: Path) -> None:
    result = check_docker(str(tmp_path / "no-docker-here"))
    assert result.status == "fail" and "install Docker, or set CDK_DOCKER" in result.fix


def test_sagemaker_needs_docker_only(tmp_path: Path, deployable_config: Path) -> None:
    settings = load_settings(deployable_config, "dev")
    client = boto3.client(
        "secretsmanager", region_name="us-east-2", aws_access_key_id="x", aws_secret_access_key="x"
    )
    with Stubber(client):  # no call expected: any would fail
        results = before_deploy(
            settings, "sagemaker", docker=_docker(tmp_path, "print('1')"), secretsmanager=client
        )
    assert [r.status for r in results] == ["pass"]


def test_ecs_checks_each_imported_secret(tmp_path: Path, deployable_config: Path) -> None:
    settings = load_settings(deployable_config, "dev")
    client = boto3.client(
        "secretsmanager", region_name="us-east-2", aws_access_key_id="x", aws_secret_access_key="x"
    )
    stub = Stubber(client)
    stub.add_response(
        "describe_secret",
        {
            "ARN": "arn:aws:secretsmanager:us-east-2:210987654321:secret:sonic/dev/cartesia-api-key-AbCdEf",
            "Name": "sonic/dev/cartesia-api-key",
            "LastChangedDate": datetime(2026, 11, 1, tzinfo=UTC),
        },
        {"SecretId": "sonic/dev/cartesia-api-key"},
    )
    stub.add_client_error(
        "describe_secret",
        service_error_code="ResourceNotFoundException",
        service_message="Secrets Manager can't find the specified secret.",
        http_status_code=400,
        expected_params={"SecretId": "sonic/dev/cartesia-registry"},
    )
    with stub:
        results = before_deploy(
            settings, "ecs", docker=_docker(tmp_path, "print('1')"), secretsmanager=client
        )
    stub.assert_no_pending_responses()
    assert [(r.check, r.status) for r in results] == [
        ("Docker (cdk deploy builds the probe image)", "pass"),
        ("secret sonic/dev/cartesia-api-key", "pass"),
        ("secret sonic/dev/cartesia-registry", "fail"),
    ]
    assert results[-1].fix.startswith(
        "create it: aws secretsmanager create-secret --name sonic/dev/cartesia-registry"
    )
