"""`sonic-deploy connect`: both routes, as text and JSON, from DescribeStacks answered by botocore's Stubber
(every request checked against CloudFormation's own model); and each error, on one line with its fix."""

from __future__ import annotations

import json
import os
import re
import socket
from pathlib import Path

import pytest
from aws_cdk.assertions import Template

from sonic_deploy.cli import main
from sonic_deploy.connect.deployment import api_urls
from sonic_deploy.routes import ROUTES
from tests.cdk_context import ROOT
from tests.conftest import CONFIG_DIR

from .conftest import (
    ACCOUNT,
    DEPLOYED_ECS_OUTPUTS,
    DEPLOYED_SAGEMAKER_OUTPUTS,
    NLB,
    REGION,
    StubbedCloudFormation,
)

ECS, SAGEMAKER = "sonic-dev-ecs", "sonic-dev-sagemaker"
KEY_COMMAND = (
    "aws secretsmanager get-secret-value --secret-id sonic/dev/cartesia-api-key --query SecretString "
    "--output text --region us-east-2"
)


def connect(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["connect", "--env", "dev", "--config-dir", str(CONFIG_DIR), *args])
    out, err = capsys.readouterr()
    return code, out, err


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def one_line_error(err: str, code: int, expected_code: int = 1) -> str:
    assert code == expected_code
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("sonic-deploy connect: ")
    return err.strip()


def test_every_output_connect_reads_is_one_the_stacks_make(
    ecs_template: Template, sagemaker_template: Template
) -> None:
    assert set(ROUTES["ecs"].connect_outputs) <= set(ecs_template.to_json()["Outputs"])
    assert set(ROUTES["sagemaker"].connect_outputs) <= set(sagemaker_template.to_json()["Outputs"])


def test_ecs_as_json(cloudformation: StubbedCloudFormation, capsys: pytest.CaptureFixture[str]) -> None:
    cloudformation.deployed(ECS, DEPLOYED_ECS_OUTPUTS)
    code, out, err = connect(capsys, "--route", "ecs", "--json", "--profile", "ops")
    assert (code, err) == (0, "")
    assert cloudformation.made_for == [("ops", REGION)]
    assert json.loads(out) == {
        "environment": "dev",
        "route": "ecs",
        "stack": ECS,
        "region": REGION,
        "settings": {
            "websocket_url": f"ws://{NLB}:80/tts/websocket",
            "http_base_url": f"http://{NLB}:80",
            "model_id": "sonic-3",
            "cartesia_version": "2025-04-16",
            "api_key_secret": "sonic/dev/cartesia-api-key",
            "api_key_env": "CARTESIA_API_KEY",
            "api_key_command": KEY_COMMAND,
            "tls": False,
            "ca_bundle": None,
        },
    }


def test_ecs_as_text(cloudformation: StubbedCloudFormation, capsys: pytest.CaptureFixture[str]) -> None:
    cloudformation.deployed(ECS, DEPLOYED_ECS_OUTPUTS)
    code, out, err = connect(capsys, "--route", "ecs")
    assert (code, err) == (0, "")
    assert out.startswith(f"{ECS} in {REGION}: the ECS route")
    assert f"  WebSocket URL     ws://{NLB}:80/tts/websocket  (output ApiUrl: pipecat's url)" in out
    assert f"  HTTP base URL     http://{NLB}:80  (from ApiUrl: LiveKit's base_url)" in out
    assert "  API key           sonic/dev/cartesia-api-key  (output ApiKeySecret" in out
    assert f'  export CARTESIA_API_KEY="$({KEY_COMMAND})"' in out
    assert (
        "Encryption: none. The URL is ws://, plain TCP: the API key and the audio cross the VPC unencrypted."
        in out
    )
    assert "TLS is off for this environment (ecs.api.tls = false, the default in dev only)" in out
    assert "SSL_CERT_FILE" not in out and "ssl" not in "".join(python_blocks(out))
    pipecat, livekit, client = python_blocks(out)
    assert f'url="ws://{NLB}:80/tts/websocket"' in pipecat and 'cartesia_version="2025-04-16"' in pipecat
    assert 'model="sonic-3"' in pipecat and "settings=CartesiaTTSService.Settings(" in pipecat
    assert f'base_url="http://{NLB}:80"' in livekit and 'api_version="2025-04-16"' in livekit
    assert f'"ws://{NLB}:80/tts/websocket"' in client and 'model_id="sonic-3"' in client
    for code_text in (pipecat, livekit, client):
        compile(code_text, "snippet", "exec")  # copy-pasteable: valid Python as printed


def test_pipecat_keeps_its_own_api_version_when_the_deployment_has_it(
    cloudformation: StubbedCloudFormation, capsys: pytest.CaptureFixture[str]
) -> None:
    cloudformation.deployed(ECS, {**DEPLOYED_ECS_OUTPUTS, "CartesiaVersion": "2026-03-01"})
    _, out, _ = connect(capsys, "--route", "ecs", "--framework", "pipecat")
    (pipecat,) = python_blocks(out)
    assert "cartesia_version" not in pipecat, "no deprecated argument where it would change nothing"
    assert "## LiveKit" not in out


def test_ecs_over_tls_names_the_ca_for_each_framework(
    cloudformation: StubbedCloudFormation, capsys: pytest.CaptureFixture[str]
) -> None:
    cloudformation.deployed(
        ECS, {**DEPLOYED_ECS_OUTPUTS, "ApiUrl": "wss://sonic.internal.example:443/tts/websocket"}
    )
    code, out, err = connect(capsys, "--route", "ecs", "--ca-bundle", "/etc/sonic/private ca.pem")
    assert code == 0
    assert err == (
        "sonic-deploy connect: note: /etc/sonic/private ca.pem is not on this machine, so it was not checked: "
        "put the CA's PEM file there on the agents' hosts\n"
    )
    assert "Encryption: TLS (wss://)" in out and "unencrypted" not in out
    assert "  export SSL_CERT_FILE='/etc/sonic/private ca.pem'" in out
    pipecat, livekit, client = python_blocks(out)
    assert 'url="wss://sonic.internal.example:443/tts/websocket"' in pipecat
    assert 'base_url="https://sonic.internal.example:443"' in livekit
    assert 'ssl.create_default_context(cafile="/etc/sonic/private ca.pem")' in livekit
    assert "http_session=cartesia_http" in livekit
    assert 'ssl_context=ssl.create_default_context(cafile="/etc/sonic/private ca.pem")' in client


@pytest.mark.parametrize(
    ("content", "problem"),
    [(b"not a certificate\n", "holds no PEM certificate"), (b"", "holds no PEM certificate")],
)
def test_a_ca_bundle_here_that_is_not_one_is_a_usage_error(
    content: bytes, problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(content)
    code, _, err = connect(capsys, "--route", "ecs", "--ca-bundle", str(bundle))
    line = one_line_error(err, code, expected_code=2)
    assert line.startswith(f"sonic-deploy connect: --ca-bundle: {bundle} {problem}") and "Fix: " in line


def test_tls_without_ca_bundle_shows_where_the_path_goes(
    cloudformation: StubbedCloudFormation, capsys: pytest.CaptureFixture[str]
) -> None:
    cloudformation.deployed(
        ECS, {**DEPLOYED_ECS_OUTPUTS, "ApiUrl": "wss://sonic.internal.example/tts/websocket"}
    )
    _, out, _ = connect(capsys, "--route", "ecs", "--json")
    settings = json.loads(out)["settings"]
    assert (settings["tls"], settings["ca_bundle"]) == (True, None)
    cloudformation.deployed(
        ECS, {**DEPLOYED_ECS_OUTPUTS, "ApiUrl": "wss://sonic.internal.example/tts/websocket"}
    )
    _, out, _ = connect(capsys, "--route", "ecs")
    assert "/path/to/private-ca.pem below (pass --ca-bundle PATH" in out


def test_a_ca_bundle_for_a_plain_url_is_noted_as_unused(
    cloudformation: StubbedCloudFormation, capsys: pytest.CaptureFixture[str]
) -> None:
    cloudformation.deployed(ECS, DEPLOYED_ECS_OUTPUTS)
    code, out, err = connect(capsys, "--route", "ecs", "--ca-bundle", "ca.pem")
    assert code == 0 and "Encryption: none" in out
    assert (
        err
        == f"sonic-deploy connect: note: --ca-bundle is unused: the API is at ws://{NLB}:80/tts/websocket, without TLS\n"
    )


def test_sagemaker_as_json_and_text(
    cloudformation: StubbedCloudFormation, capsys: pytest.CaptureFixture[str]
) -> None:
    cloudformation.deployed(SAGEMAKER, DEPLOYED_SAGEMAKER_OUTPUTS)
    code, out, err = connect(capsys, "--route", "sagemaker", "--json")
    arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/sonic-dev"
    assert (code, err) == (0, "")
    assert json.loads(out) == {
        "environment": "dev",
        "route": "sagemaker",
        "stack": SAGEMAKER,
        "region": REGION,
        "settings": {
            "endpoint_name": "sonic-dev",
            "endpoint_arn": arn,
            "runtime_vpc_endpoint_dns": DEPLOYED_SAGEMAKER_OUTPUTS["RuntimeVpcEndpointDns"],
            "iam_action": "sagemaker:InvokeEndpointWithResponseStream",
        },
    }
    cloudformation.deployed(SAGEMAKER, DEPLOYED_SAGEMAKER_OUTPUTS)
    code, out, _ = connect(capsys, "--route", "sagemaker")
    assert out.startswith(f"{SAGEMAKER} in {REGION}: the SageMaker route")
    assert (
        json.dumps(
            {"Effect": "Allow", "Action": "sagemaker:InvokeEndpointWithResponseStream", "Resource": arn}
        )
        in out
    )
    pipecat, livekit, bare = python_blocks(out)
    assert "from sonic_deploy.client.pipecat import SonicSageMakerTTSService" in pipecat
    assert 'endpoint_name="sonic-dev",\n    region="us-east-2",\n    voice_id=' in pipecat
    assert "from sonic_deploy.client.livekit import SonicSageMakerTTS" in livekit and "    voice=" in livekit
    assert 'SageMakerClient("sonic-dev", region="us-east-2")' in bare and "sonic.speak(" in bare
    assert "pip install 'sonic-deploy[pipecat]'" in out and "pip install 'sonic-deploy[client]'" in out
    for code_text in (pipecat, livekit, bare):
        compile(code_text, "snippet", "exec")
    cloudformation.deployed(SAGEMAKER, DEPLOYED_SAGEMAKER_OUTPUTS)
    _, out, _ = connect(capsys, "--route", "sagemaker", "--framework", "livekit")
    assert len(python_blocks(out)) == 1 and "## LiveKit Agents" in out and "## pipecat" not in out


def test_an_endpoint_arn_in_lower_case_and_none_without_an_account(
    cloudformation: StubbedCloudFormation, capsys: pytest.CaptureFixture[str]
) -> None:
    cloudformation.deployed(SAGEMAKER, {**DEPLOYED_SAGEMAKER_OUTPUTS, "EndpointName": "Sonic-Dev"})
    _, out, _ = connect(capsys, "--route", "sagemaker", "--json")
    assert json.loads(out)["settings"]["endpoint_arn"].endswith(":endpoint/sonic-dev")
    cloudformation.deployed(SAGEMAKER, DEPLOYED_SAGEMAKER_OUTPUTS, stack_id=SAGEMAKER)
    _, out, _ = connect(capsys, "--route", "sagemaker", "--json")
    assert json.loads(out)["settings"]["endpoint_arn"] is None
    cloudformation.deployed(SAGEMAKER, DEPLOYED_SAGEMAKER_OUTPUTS, stack_id=SAGEMAKER)
    _, out, _ = connect(capsys, "--route", "sagemaker")
    assert "arn:aws:sagemaker:us-east-2:ACCOUNT:endpoint/sonic-dev  (put in your account id)" in out


@pytest.mark.parametrize(
    ("api_url", "websocket_url", "base_url"),
    [
        ("ws://nlb:80/tts/websocket", "ws://nlb:80/tts/websocket", "http://nlb:80"),
        ("wss://sonic.example/tts/websocket", "wss://sonic.example/tts/websocket", "https://sonic.example"),
        (
            "wss://proxy:8443/sonic/tts/websocket",
            "wss://proxy:8443/sonic/tts/websocket",
            "https://proxy:8443/sonic",
        ),
    ],
)
def test_urls_from_api_url(api_url: str, websocket_url: str, base_url: str) -> None:
    assert api_urls(api_url, ECS) == (websocket_url, base_url)


def test_a_stack_that_is_not_deployed(
    cloudformation: StubbedCloudFormation, capsys: pytest.CaptureFixture[str]
) -> None:
    cloudformation.error(ECS, "ValidationError", f"Stack with id {ECS} does not exist", 400)
    code, _, err = connect(capsys, "--route", "ecs")
    assert one_line_error(err, code) == (
        f"sonic-deploy connect: {ECS} is not deployed in {REGION}: CloudFormation has no stack of that name "
        "there. Fix: cdk deploy SonicEcs -c env=dev (make deploy ENV=dev ROUTE=ecs); or pick the environment "
        "(--env) it was deployed as"
    )


def test_a_route_the_environment_does_not_deploy(
    cloudformation: StubbedCloudFormation, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["connect", "--env", "prod", "--route", "ecs", "--config-dir", str(CONFIG_DIR)])
    error = one_line_error(capsys.readouterr().err, code, expected_code=2)
    assert 'environment prod does not deploy the ecs route (routes = ["sagemaker"] in ' in error
    assert error.endswith('Fix: pass --route sagemaker, or add "ecs" to its routes and deploy it')
    assert cloudformation.made_for == [], "refused before any AWS call"


def test_a_ca_bundle_for_the_sagemaker_route_is_a_usage_error(
    cloudformation: StubbedCloudFormation, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = connect(capsys, "--route", "sagemaker", "--ca-bundle", "ca.pem")
    assert "--ca-bundle is for the ECS route's TLS" in one_line_error(err, code, expected_code=2)
    assert cloudformation.made_for == []


def test_a_stack_deployed_by_an_older_sonic_deploy(
    cloudformation: StubbedCloudFormation, capsys: pytest.CaptureFixture[str]
) -> None:
    older = {key: DEPLOYED_ECS_OUTPUTS[key] for key in ("ApiUrl", "ClusterName", "AvailabilityZone")}
    cloudformation.deployed(ECS, older)
    code, _, err = connect(capsys, "--route", "ecs")
    assert one_line_error(err, code) == (
        f"sonic-deploy connect: stack {ECS} has no output ModelId, CartesiaVersion, ApiKeySecret, Region: it "
        "was deployed by an older sonic-deploy. Fix: deploy it again with this one: cdk deploy SonicEcs -c "
        "env=dev (make deploy ENV=dev ROUTE=ecs)"
    )


def test_a_stack_whose_first_create_failed(
    cloudformation: StubbedCloudFormation, capsys: pytest.CaptureFixture[str]
) -> None:
    cloudformation.deployed(SAGEMAKER, {}, status="ROLLBACK_COMPLETE")
    code, _, err = connect(capsys, "--route", "sagemaker")
    error = one_line_error(err, code)
    assert f"stack {SAGEMAKER} is ROLLBACK_COMPLETE: it has no working deployment to connect to" in error
    assert "older sonic-deploy" not in error


def test_an_api_url_of_another_form(
    cloudformation: StubbedCloudFormation, capsys: pytest.CaptureFixture[str]
) -> None:
    cloudformation.deployed(ECS, {**DEPLOYED_ECS_OUTPUTS, "ApiUrl": f"http://{NLB}/tts/bytes"})
    code, _, err = connect(capsys, "--route", "ecs")
    assert "output ApiUrl = 'http://" in one_line_error(err, code)


def test_access_denied_names_the_action(
    cloudformation: StubbedCloudFormation, capsys: pytest.CaptureFixture[str]
) -> None:
    denied = (
        f"User: arn:aws:sts::{ACCOUNT}:assumed-role/agent-host/i-0abc is not authorized to perform: "
        f"cloudformation:DescribeStacks on resource: arn:aws:cloudformation:{REGION}:{ACCOUNT}:stack/{ECS}/* "
        "because no identity-based policy allows the cloudformation:DescribeStacks action"
    )
    cloudformation.error(ECS, "AccessDenied", denied, 403)
    code, _, err = connect(capsys, "--route", "ecs")
    assert one_line_error(err, code) == (
        f"sonic-deploy connect: not allowed to call cloudformation:DescribeStacks on {ECS} in {REGION}: "
        f"{denied}. Fix: grant the credentials cloudformation:DescribeStacks (read-only) on the stack, or pass "
        "--profile with a role that has it"
    )


def test_expired_credentials_say_sign_in_again(
    cloudformation: StubbedCloudFormation, capsys: pytest.CaptureFixture[str]
) -> None:
    cloudformation.error(ECS, "ExpiredToken", "The security token included in the request is expired", 400)
    code, _, err = connect(capsys, "--route", "ecs")
    assert one_line_error(err, code) == (
        "sonic-deploy connect: AWS refused the credentials (ExpiredToken: The security token included in the "
        "request is expired). Fix: sign in again (e.g. `aws sso login --profile NAME`), or check --profile and "
        "the AWS_* variables"
    )


def test_another_aws_error_is_one_line(
    cloudformation: StubbedCloudFormation, capsys: pytest.CaptureFixture[str]
) -> None:
    cloudformation.error(ECS, "Throttling", "Rate exceeded", 400)
    code, _, err = connect(capsys, "--route", "ecs")
    assert (
        "cloudformation:DescribeStacks on sonic-dev-ecs in us-east-2 failed: Throttling: Rate exceeded"
        in (one_line_error(err, code))
    )


@pytest.fixture
def no_aws_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No credentials anywhere boto3 looks (environment, files, instance metadata, containers)."""
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.mark.usefixtures("no_aws_config")
def test_no_credentials_and_no_such_profile(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = connect(capsys, "--route", "ecs")
    error = one_line_error(err, code)
    assert error.startswith(
        "sonic-deploy connect: cannot talk to AWS: Unable to locate credentials. Fix: check"
    )
    code, _, err = connect(capsys, "--route", "ecs", "--profile", "nosuch")
    assert "cannot talk to AWS: The config profile (nosuch) could not be found" in one_line_error(err, code)


@pytest.mark.usefixtures("no_aws_config")
def test_no_network(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    # Nothing listens there once the socket is closed: a refused connection, at once, and tried once.
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDFORMATION", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    code, _, err = connect(capsys, "--route", "ecs")
    assert "cannot talk to AWS: Could not connect to the endpoint URL" in one_line_error(err, code)


def test_an_unknown_environment_is_a_config_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["connect", "--env", "nosuch", "--route", "ecs", "--config-dir", str(CONFIG_DIR)])
    assert code == 2 and "unknown environment" in capsys.readouterr().err


def test_the_docs_show_the_snippets_connect_prints(
    cloudformation: StubbedCloudFormation, capsys: pytest.CaptureFixture[str]
) -> None:
    printed: list[str] = []
    for route, outputs, options in (
        ("ecs", DEPLOYED_ECS_OUTPUTS, ()),
        (
            "ecs",
            {**DEPLOYED_ECS_OUTPUTS, "ApiUrl": "wss://sonic.internal.example:443/tts/websocket"},
            ("--ca-bundle", "/etc/ssl/sonic/private-ca.pem"),
        ),
        ("sagemaker", DEPLOYED_SAGEMAKER_OUTPUTS, ()),
    ):
        cloudformation.deployed(f"sonic-dev-{route}", outputs)
        printed += python_blocks(connect(capsys, "--route", route, *options)[1])
    documented = python_blocks((ROOT / "docs" / "connect.md").read_text())
    assert len(documented) == 7
    for block in documented:
        assert block in printed, f"docs/connect.md shows a snippet connect does not print:\n{block}"


@pytest.mark.parametrize(
    ("shape", "problem"), [("fifo", "a named pipe (FIFO), not a file"), ("folder", "a directory, not a file")]
)
def test_a_ca_bundle_that_is_not_a_file_is_refused_without_reading_it(
    shape: str, problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A FIFO used to block the command until a writer came."""
    bundle = tmp_path / "ca.pem"
    if shape == "fifo":
        os.mkfifo(bundle)
    else:
        bundle.mkdir()
    code, _, err = connect(capsys, "--route", "ecs", "--ca-bundle", str(bundle))
    line = one_line_error(err, code, expected_code=2)
    assert line.startswith(f"sonic-deploy connect: --ca-bundle: cannot read {bundle}: {problem}. Fix: "), line
