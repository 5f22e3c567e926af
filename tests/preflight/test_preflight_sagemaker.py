"""The Marketplace model package (Stubber for the subscription errors, moto for not-found), the endpoint
instance quota (Stubber: moto has no Service Quotas list call) and the AZs (moto's real offering data)."""

from __future__ import annotations

import dataclasses

from sonic_deploy.config import Settings
from sonic_deploy.routes.sagemaker.preflight import (
    check_endpoint_log_group,
    check_endpoint_quota,
    check_model_package,
    check_zones_offer_hardware,
    describe_model_package,
)
from tests.preflight.conftest import MOTO_ACCOUNT, SONIC_ARN, FakeAws

QUOTA_NAME = "ml.g6e.xlarge for endpoint usage"


def test_subscribed_package_passes(fake_aws: FakeAws, settings: Settings) -> None:
    fake_aws.stub_sagemaker_package()
    result = check_model_package(
        describe_model_package(fake_aws.clients.sagemaker, SONIC_ARN), settings, MOTO_ACCOUNT
    )
    assert (result.status, result.detail) == ("pass", f"{SONIC_ARN} can be described (Completed)")


def test_not_subscribed_is_recognised(fake_aws: FakeAws, settings: Settings) -> None:
    fake_aws.stub_sagemaker_error(
        "ValidationException", "Caller is not subscribed to the marketplace offering."
    )
    result = check_model_package(
        describe_model_package(fake_aws.clients.sagemaker, SONIC_ARN), settings, MOTO_ACCOUNT
    )
    assert result.status == "fail"
    assert result.detail == (
        f"account {MOTO_ACCOUNT} is not subscribed to {SONIC_ARN} "
        "(Caller is not subscribed to the marketplace offering.)"
    )
    assert result.fix.startswith(
        "subscribe to the Cartesia Sonic listing on AWS Marketplace with this account"
    )


def test_package_in_another_state_fails(fake_aws: FakeAws, settings: Settings) -> None:
    fake_aws.stub_sagemaker_package(status="Failed")
    result = check_model_package(
        describe_model_package(fake_aws.clients.sagemaker, SONIC_ARN), settings, MOTO_ACCOUNT
    )
    assert (result.status, result.detail) == ("fail", f"{SONIC_ARN} is in state Failed, not Completed")


def test_access_denied_names_the_permission(fake_aws: FakeAws, settings: Settings) -> None:
    fake_aws.stub_sagemaker_error("AccessDeniedException", "User is not authorized")
    result = check_model_package(
        describe_model_package(fake_aws.clients.sagemaker, SONIC_ARN), settings, MOTO_ACCOUNT
    )
    assert result.status == "fail"
    assert result.detail == "not allowed to call sagemaker:DescribeModelPackage: User is not authorized"


def test_unknown_package_with_moto(settings: Settings) -> None:
    import boto3
    from moto import mock_aws

    with mock_aws():
        sagemaker = boto3.client("sagemaker", region_name="us-east-2")
        result = check_model_package(describe_model_package(sagemaker, SONIC_ARN), settings, MOTO_ACCOUNT)
    assert result.status == "fail"
    assert result.detail.startswith(f"{SONIC_ARN} does not exist in us-east-2 (Model package")
    assert "Model packages > My subscriptions" in result.fix


def test_endpoint_quota_enough_for_blue_green(fake_aws: FakeAws, settings: Settings) -> None:
    # dev: max_instances 4 -> a blue/green update briefly needs 8.
    fake_aws.stub_endpoint_quota(QUOTA_NAME, 8.0)
    result = check_endpoint_quota(fake_aws.clients.service_quotas, fake_aws.clients.sagemaker, settings)
    assert result.check == f"quota: {QUOTA_NAME}"
    assert (result.status, result.detail) == (
        "pass",
        "8 instances (applied); needs 8: max_instances 4 x 2 for a blue/green update, + 0 on 0 other endpoints",
    )


def test_endpoint_quota_counts_other_endpoints_on_the_same_type(
    fake_aws: FakeAws, settings: Settings
) -> None:
    fake_aws.stub_endpoint_quota(QUOTA_NAME, 10.0)
    fake_aws.stub_other_endpoints(
        ("sonic-dev", "InService", "ml.g6e.xlarge", 4),  # ours: already inside max_instances x 2
        ("other-team", "InService", "ml.g6e.xlarge", 3),
        ("batch", "InService", "ml.g5.xlarge", 2),  # another type, another quota
        ("broken", "Failed", "ml.g6e.xlarge", 0),
    )
    result = check_endpoint_quota(fake_aws.clients.service_quotas, fake_aws.clients.sagemaker, settings)
    assert result.status == "fail"
    assert result.detail == (
        "10 instances (applied); needs 11: max_instances 4 x 2 for a blue/green update, + 3 on 1 other endpoints"
    )


def test_endpoint_quota_too_low_gives_the_request_command(fake_aws: FakeAws, settings: Settings) -> None:
    fake_aws.stub_endpoint_quota(QUOTA_NAME, 2.0, applied=False)  # only AWS's default is known
    result = check_endpoint_quota(fake_aws.clients.service_quotas, fake_aws.clients.sagemaker, settings)
    assert result.status == "fail"
    assert result.detail.startswith("2 instances (AWS default); needs 8")
    assert result.fix == (
        "request 8: aws service-quotas request-service-quota-increase --region us-east-2 --service-code "
        "sagemaker --quota-code L-TEST0001 --desired-value 8"
    )


def test_endpoint_quota_unknown_instance_type(fake_aws: FakeAws, settings: Settings) -> None:
    fake_aws.quotas.add_response("list_service_quotas", {"Quotas": []}, {"ServiceCode": "sagemaker"})
    fake_aws.quotas.add_response(
        "list_aws_default_service_quotas", {"Quotas": []}, {"ServiceCode": "sagemaker"}
    )
    result = check_endpoint_quota(fake_aws.clients.service_quotas, fake_aws.clients.sagemaker, settings)
    assert (result.status, result.detail) == (
        "fail",
        f"Service Quotas has no quota named '{QUOTA_NAME}' in us-east-2",
    )


def test_configured_zones_offer_the_hardware(fake_aws: FakeAws, settings: Settings) -> None:
    result = check_zones_offer_hardware(fake_aws.clients.ec2, settings)
    assert result.status == "pass"
    assert result.detail.startswith("EC2 offers g6e.xlarge in us-east-2a, us-east-2b")


def test_a_zone_without_the_hardware_fails(fake_aws: FakeAws, settings: Settings) -> None:
    network = settings.environment.network.model_copy(
        update={"availability_zones": ["us-east-2a", "us-east-2z"]}
    )
    changed = dataclasses.replace(
        settings, environment=settings.environment.model_copy(update={"network": network})
    )
    result = check_zones_offer_hardware(fake_aws.clients.ec2, changed)
    assert result.status == "fail"
    assert result.detail.startswith(
        "EC2 does not offer g6e.xlarge (the hardware behind ml.g6e.xlarge) in us-east-2z"
    )
    assert result.fix.startswith("name AZs from us-east-2a, us-east-2b, us-east-2c")


def test_a_log_group_left_by_an_earlier_endpoint_fails_with_the_fix(
    fake_aws: FakeAws, settings: Settings
) -> None:
    clients = fake_aws.clients
    assert check_endpoint_log_group(clients.logs, clients.cloudformation, settings).status == "pass"
    clients.logs.create_log_group(logGroupName="/aws/sagemaker/Endpoints/sonic-dev")
    clients.logs.create_log_group(logGroupName="/aws/sagemaker/Endpoints/sonic-dev-2")  # another endpoint's
    result = check_endpoint_log_group(clients.logs, clients.cloudformation, settings)
    assert (result.status, result.check) == ("fail", "log group /aws/sagemaker/Endpoints/sonic-dev")
    assert (
        "aws logs delete-log-group --log-group-name /aws/sagemaker/Endpoints/sonic-dev --region us-east-2"
        in (result.fix)
    )
    # Once the stack is deployed the group is its own.
    clients.cloudformation.create_stack(
        StackName="sonic-dev-sagemaker",
        TemplateBody='{"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}}',
    )
    owned = check_endpoint_log_group(clients.logs, clients.cloudformation, settings)
    assert (owned.status, owned.detail) == ("pass", "owned by the deployed stack sonic-dev-sagemaker")
