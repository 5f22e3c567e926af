"""LIVE mode: the deployed template comes from CloudFormation get_template (moto and botocore's Stubber)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from sonic_deploy.changes import cli
from sonic_deploy.changes.cli import EXIT_DANGEROUS, EXIT_OK, EXIT_USAGE, main
from sonic_deploy.changes.live import LiveTemplateError, deployed_template
from tests.changes.assemblies import finish_synth

CONFIG = Path(__file__).resolve().parents[2] / "config"


def queue_stack(queue_name: str) -> dict[str, Any]:
    # moto can create an SQS queue from a template; the classifier treats QueueName as create-only.
    return {"Resources": {"Queue": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": queue_name}}}}


def endpoint_stack(endpoint_name: str) -> dict[str, Any]:
    return {
        "Resources": {
            "Endpoint": {
                "Type": "AWS::SageMaker::Endpoint",
                "Properties": {"EndpointName": endpoint_name, "EndpointConfigName": "cfg"},
            }
        }
    }


@pytest.fixture
def fake_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture
def aws(fake_credentials: None) -> Iterator[None]:
    with mock_aws():
        yield


def synthesize(tmp_path: Path, template: dict[str, Any]) -> None:
    path = tmp_path / "synth/dev/SonicSageMaker.template.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(template), encoding="utf-8")
    finish_synth(path.parent, config=CONFIG)


def live_diff(tmp_path: Path) -> int:
    return main(
        ["--config", str(CONFIG), "diff", "--env", "dev", "--live", "--synthesized", str(tmp_path / "synth")]
    )


def test_live_diff_reads_the_deployed_stack(
    aws: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    boto3.client("cloudformation", region_name="us-east-2").create_stack(
        StackName="sonic-dev-sagemaker", TemplateBody=json.dumps(queue_stack("sonic-a"))
    )
    synthesize(tmp_path, queue_stack("sonic-b"))
    assert live_diff(tmp_path) == EXIT_OK  # a queue is not critical: reported, not failed
    out = capsys.readouterr().out
    assert "compared with deployed stack sonic-dev-sagemaker (us-east-2)" in out
    assert "replaced Queue  AWS::SQS::Queue" in out
    assert "QueueName is create-only" in out


def test_live_diff_of_a_stack_not_deployed_counts_all_as_added(
    aws: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    synthesize(tmp_path, endpoint_stack("sonic-dev"))
    assert live_diff(tmp_path) == EXIT_OK
    out = capsys.readouterr().out
    assert "stack sonic-dev-sagemaker is not deployed in us-east-2" in out
    assert "added    Endpoint" in out


def stubbed_client(monkeypatch: pytest.MonkeyPatch) -> Stubber:
    client = boto3.client("cloudformation", region_name="us-east-2")
    monkeypatch.setattr(cli, "cloudformation_client", lambda region: client)
    return Stubber(client)


def test_live_diff_fails_on_endpoint_replacement(
    fake_credentials: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    stubber = stubbed_client(monkeypatch)
    stubber.add_response(
        "get_template",
        {"TemplateBody": json.dumps(endpoint_stack("sonic-dev"))},
        {"StackName": "sonic-dev-sagemaker", "TemplateStage": "Original"},
    )
    synthesize(tmp_path, endpoint_stack("sonic-dev-2"))
    with stubber:
        assert live_diff(tmp_path) == EXIT_DANGEROUS
    stubber.assert_no_pending_responses()


def test_access_denied_says_which_permission(
    fake_credentials: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    stubber = stubbed_client(monkeypatch)
    stubber.add_client_error(
        "get_template", "AccessDenied", "not authorized to perform: cloudformation:GetTemplate"
    )
    synthesize(tmp_path, endpoint_stack("sonic-dev"))
    with stubber:
        assert live_diff(tmp_path) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "reading the template of stack sonic-dev-sagemaker failed" in err
    assert "cloudformation:GetTemplate" in err and "Traceback" not in err


def test_yaml_template_is_refused_clearly(fake_credentials: None) -> None:
    client = boto3.client("cloudformation", region_name="us-east-2")
    with Stubber(client) as stubber:
        stubber.add_response("get_template", {"TemplateBody": "Resources: {}\n"})
        with pytest.raises(LiveTemplateError, match="deployed from a YAML template"):
            deployed_template(client, "sonic-dev-sagemaker")


def test_no_credentials_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A botocore session that knows no way to find credentials: the call fails before any network use.
    session = botocore.session.get_session()
    session.get_component("credential_provider").providers = []
    client = boto3.session.Session(botocore_session=session).client("cloudformation", region_name="us-east-2")
    monkeypatch.setattr(cli, "cloudformation_client", lambda region: client)
    synthesize(tmp_path, endpoint_stack("sonic-dev"))
    assert live_diff(tmp_path) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "LIVE=1 needs AWS credentials and found none" in err
    assert "drop LIVE=1 to diff against the baselines" in err
