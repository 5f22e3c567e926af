"""Credentials and account (moto STS), CDK bootstrap stack (moto CloudFormation), the client ranges' rules
quota (Stubber: moto has no Service Quotas list call)."""

from __future__ import annotations

import dataclasses

import boto3
from botocore.stub import Stubber
from moto import mock_aws

from sonic_deploy.config import Settings
from sonic_deploy.preflight.account_checks import check_bootstrap, check_client_rules_quota, check_identity
from tests.preflight.conftest import MOTO_ACCOUNT, REGION, FakeAws, bootstrap_template, with_account


def test_identity_without_an_account_in_config_passes_and_says_so(
    fake_aws: FakeAws, settings: Settings
) -> None:
    result, account = check_identity(fake_aws.clients.sts, settings)
    assert account == MOTO_ACCOUNT
    assert result.status == "pass"
    assert "config/environments/dev.toml names no account: deploying into this one" in result.detail


def test_identity_matching_the_configured_account(fake_aws: FakeAws, settings: Settings) -> None:
    result, account = check_identity(fake_aws.clients.sts, with_account(settings, MOTO_ACCOUNT))
    assert (result.status, account) == ("pass", MOTO_ACCOUNT)
    assert "matches config/environments/dev.toml" in result.detail


def test_identity_for_the_wrong_account_fails_with_the_fix(fake_aws: FakeAws, settings: Settings) -> None:
    result, account = check_identity(fake_aws.clients.sts, with_account(settings, "210987654321"))
    assert account is None
    assert result.status == "fail"
    assert result.detail == (
        f"the credentials are for account {MOTO_ACCOUNT}, config/environments/dev.toml says account = 210987654321"
    )
    assert result.fix.startswith("use credentials for 210987654321 (--profile NAME)")


def test_expired_credentials(settings: Settings) -> None:
    sts = boto3.client("sts", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(sts) as stub:
        stub.add_client_error(
            "get_caller_identity", "ExpiredToken", "The security token included in the request is expired"
        )
        result, account = check_identity(sts, settings)
    assert (result.status, account) == ("fail", None)
    assert "ExpiredToken" in result.detail and "aws sso login" in result.fix


def test_bootstrap_missing_then_current_then_old(fake_aws: FakeAws) -> None:
    cloudformation = fake_aws.clients.cloudformation
    missing = check_bootstrap(cloudformation, MOTO_ACCOUNT, REGION)
    assert (missing.status, missing.detail) == ("fail", f"no CDKToolkit stack in {MOTO_ACCOUNT} / {REGION}")
    assert missing.fix == f"run `cdk bootstrap aws://{MOTO_ACCOUNT}/{REGION}` with a current CDK CLI"

    cloudformation.create_stack(StackName="CDKToolkit", TemplateBody=bootstrap_template("28"))
    current = check_bootstrap(cloudformation, MOTO_ACCOUNT, REGION)
    assert current.status == "pass"
    assert current.detail == "CDKToolkit version 28 (CREATE_COMPLETE), at least 6"


def test_bootstrap_below_the_cdk_minimum_fails_and_below_lookups_warns() -> None:
    with mock_aws():
        cloudformation = boto3.client("cloudformation", region_name=REGION)
        cloudformation.create_stack(StackName="CDKToolkit", TemplateBody=bootstrap_template("5"))
        old = check_bootstrap(cloudformation, MOTO_ACCOUNT, REGION)
        assert (old.status, old.detail) == ("fail", "CDKToolkit is version 5, sonic-deploy needs 6 or later")
        cloudformation.delete_stack(StackName="CDKToolkit")
        cloudformation.create_stack(StackName="CDKToolkit", TemplateBody=bootstrap_template("7"))
        lookups = check_bootstrap(cloudformation, MOTO_ACCOUNT, REGION)
        assert lookups.status == "pass"
        assert "context lookups would need version 8" in lookups.detail


def test_bootstrap_in_a_failed_state() -> None:
    cloudformation = boto3.client(
        "cloudformation", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
    )
    with Stubber(cloudformation) as stub:
        stub.add_response(
            "describe_stacks",
            {
                "Stacks": [
                    {
                        "StackName": "CDKToolkit",
                        "CreationTime": "2026-01-01T00:00:00Z",
                        "StackStatus": "ROLLBACK_COMPLETE",
                        "Outputs": [{"OutputKey": "BootstrapVersion", "OutputValue": "28"}],
                    }
                ]
            },
            {"StackName": "CDKToolkit"},
        )
        result = check_bootstrap(cloudformation, MOTO_ACCOUNT, REGION)
    assert (result.status, result.detail) == ("fail", "CDKToolkit is in state ROLLBACK_COMPLETE")
    assert result.fix.startswith("delete the failed CDKToolkit stack")


def _with_client_ranges(settings: Settings, count: int) -> Settings:
    ranges = [f"10.{i // 256}.{i % 256}.0/24" for i in range(count)]
    network = settings.environment.network.model_copy(update={"client_cidrs": ranges})
    return dataclasses.replace(
        settings, environment=settings.environment.model_copy(update={"network": network})
    )


def _rules_quota(value: float) -> dict[str, object]:
    return {
        "ServiceCode": "vpc",
        "QuotaCode": "L-TEST0002",
        "QuotaName": "Inbound or outbound rules per security group",
        "Value": value,
    }


def test_client_ranges_within_the_default_quota_ask_nothing(fake_aws: FakeAws, settings: Settings) -> None:
    # The Stubber has no response queued: a call would raise.
    result = check_client_rules_quota(fake_aws.clients.service_quotas, _with_client_ranges(settings, 58))
    assert (result.status, result.detail) == ("pass", "needs 60, within AWS's default of 60")


def test_client_ranges_past_the_default_need_an_applied_quota(fake_aws: FakeAws, settings: Settings) -> None:
    params = {"ServiceCode": "vpc"}
    fake_aws.quotas.add_response("list_service_quotas", {"Quotas": []}, params)
    fake_aws.quotas.add_response("list_aws_default_service_quotas", {"Quotas": [_rules_quota(60.0)]}, params)
    result = check_client_rules_quota(fake_aws.clients.service_quotas, _with_client_ranges(settings, 100))
    assert result.status == "fail"
    assert result.detail == "60 (AWS default); needs 102: 100 client ranges + 2"
    assert result.fix == (
        "request 102: aws service-quotas request-service-quota-increase --region us-east-2 --service-code vpc "
        "--quota-code L-TEST0002 --desired-value 102, or merge client ranges into wider ones"
    )
    fake_aws.quotas.add_response("list_service_quotas", {"Quotas": [_rules_quota(200.0)]}, params)
    result = check_client_rules_quota(fake_aws.clients.service_quotas, _with_client_ranges(settings, 100))
    assert (result.status, result.detail) == ("pass", "200 (applied); needs 102: 100 client ranges + 2")
