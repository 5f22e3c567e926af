"""Preflight for `[sagemaker.capacity]`: each pool type's quota, the types the package serves
(DescribeModelPackage) and the training plan (DescribeTrainingPlan), against botocore's Stubber with the
API's response shapes."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from sonic_deploy.config import Settings
from sonic_deploy.routes.sagemaker.preflight import (
    check_endpoint_quota,
    check_package_types,
    check_reservation,
    checks,
    describe_model_package,
)
from tests.preflight.conftest import MOTO_ACCOUNT, REGION, SONIC_ARN, FakeAws, with_capacity

PLAN_NAME = "sonic-endpoints"
PLAN = f"arn:aws:sagemaker:{REGION}:{MOTO_ACCOUNT}:training-plan/{PLAN_NAME}"


START = datetime.datetime.now(datetime.UTC).replace(microsecond=0) - datetime.timedelta(days=3)


def plan(
    status: str, target: str, instance_type: str, count: int, zone: str = "us-east-2a", days: int = 30
) -> dict[str, Any]:
    start = START
    return {
        "TrainingPlanArn": PLAN,
        "TrainingPlanName": PLAN_NAME,
        "Status": status,
        "StartTime": start,
        "EndTime": start + datetime.timedelta(days=days),
        "TotalInstanceCount": count,
        "TargetResources": [target],
        "ReservedCapacitySummaries": [
            {
                "ReservedCapacityArn": f"arn:aws:sagemaker:{REGION}:{MOTO_ACCOUNT}:reserved-capacity/rc-1",
                "InstanceType": instance_type,
                "TotalInstanceCount": count,
                "Status": status,
                "AvailabilityZone": zone,
            }
        ],
    }


def test_no_reservation_no_check(fake_aws: FakeAws, settings: Settings) -> None:
    assert check_reservation(fake_aws.clients.sagemaker, settings) is None


def test_a_plan_that_cannot_serve_the_endpoint_says_every_reason(
    fake_aws: FakeAws, settings: Settings
) -> None:
    # What a plan on sale today looks like: p-family only (botocore's ReservedCapacityInstanceType).
    fake_aws.sagemaker.add_response(
        "describe_training_plan",
        plan("Scheduled", "training-job", "ml.p5.48xlarge", 1),
        {"TrainingPlanName": PLAN_NAME},
    )
    result = check_reservation(fake_aws.clients.sagemaker, with_capacity(settings, ml_reservation_arn=PLAN))
    assert result is not None and result.status == "fail"
    assert result.check == f"training plan {PLAN_NAME}"
    end = START + datetime.timedelta(days=30)
    assert result.detail == (
        f"it is Scheduled, not Active ({START} to {end}); it is for training-job, not endpoints; it reserves "
        "ml.p5.48xlarge, not ml.g6e.xlarge"
    )
    assert result.fix.startswith("name an Active training plan for endpoints of that type")


def test_an_active_plan_for_the_endpoint_passes(fake_aws: FakeAws, settings: Settings) -> None:
    fake_aws.sagemaker.add_response(
        "describe_training_plan",
        plan("Active", "endpoint", "ml.g6e.xlarge", 4),
        {"TrainingPlanName": PLAN_NAME},
    )
    result = check_reservation(fake_aws.clients.sagemaker, with_capacity(settings, ml_reservation_arn=PLAN))
    assert result is not None and result.status == "pass"
    assert result.detail == (
        f"Active until {START + datetime.timedelta(days=30)}: 4 x ml.g6e.xlarge; scaling past 2 instances "
        "(max_instances 4) or an update larger than that fails (capacity-reservations-only)"
    )


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (
            plan("Active", "endpoint", "ml.g6e.xlarge", 3),
            "it holds 3 x ml.g6e.xlarge, fewer than min_instances 2 x 2",
        ),
        (plan("Active", "endpoint", "ml.g6e.xlarge", 4, days=2), "it ended at "),
        (
            plan("Active", "endpoint", "ml.g6e.xlarge", 4, zone="us-east-2c"),
            "its instances are in us-east-2c",
        ),
    ],
)
def test_a_plan_too_small_ended_or_elsewhere_fails(
    fake_aws: FakeAws, settings: Settings, answer: dict[str, Any], problem: str
) -> None:
    fake_aws.sagemaker.add_response("describe_training_plan", answer, {"TrainingPlanName": PLAN_NAME})
    result = check_reservation(fake_aws.clients.sagemaker, with_capacity(settings, ml_reservation_arn=PLAN))
    assert result is not None and result.status == "fail"
    assert problem in result.detail


def test_a_plan_it_may_not_read_names_the_permission(fake_aws: FakeAws, settings: Settings) -> None:
    fake_aws.sagemaker.add_client_error(
        "describe_training_plan", service_error_code="AccessDeniedException", service_message="not authorized"
    )
    result = check_reservation(fake_aws.clients.sagemaker, with_capacity(settings, ml_reservation_arn=PLAN))
    assert result is not None
    assert result.detail == "not allowed to call sagemaker:DescribeTrainingPlan: not authorized"


def package(*served: str) -> dict[str, Any]:
    return {
        "ModelPackageName": "Sonic3-Sagemaker-V5",
        "ModelPackageArn": SONIC_ARN,
        "CreationTime": "2026-01-01T00:00:00Z",
        "ModelPackageStatus": "Completed",
        "ModelPackageStatusDetails": {"ValidationStatuses": [], "ImageScanStatuses": []},
        "InferenceSpecification": {
            "Containers": [{"Image": "123456789012.dkr.ecr.us-east-2.amazonaws.com/sonic:3"}],
            "SupportedRealtimeInferenceInstanceTypes": list(served),
        },
    }


@pytest.mark.parametrize(
    ("served", "status", "detail"),
    [
        (("ml.g6e.xlarge", "ml.g6e.2xlarge"), "pass", "ml.g6e.xlarge, ml.g6e.2xlarge, of the 2 types"),
        (
            ("ml.g6e.xlarge",),
            "fail",
            f"{SONIC_ARN} does not serve ml.g6e.2xlarge in real time; it serves ml.g6e.xlarge",
        ),
    ],
)
def test_the_pools_are_types_the_package_serves(
    fake_aws: FakeAws, settings: Settings, served: tuple[str, ...], status: str, detail: str
) -> None:
    fake_aws.sagemaker.add_response(
        "describe_model_package", package(*served), {"ModelPackageName": SONIC_ARN}
    )
    result = check_package_types(
        describe_model_package(fake_aws.clients.sagemaker, SONIC_ARN),
        with_capacity(settings, fallback_types=["ml.g6e.2xlarge"]),
    )
    assert (result.status, result.detail.startswith(detail)) == (status, True)


def test_one_description_of_the_package_serves_both_checks(fake_aws: FakeAws, settings: Settings) -> None:
    # Answered once: a second DescribeModelPackage would find no answer queued and raise.
    fake_aws.sagemaker.add_response(
        "describe_model_package",
        package("ml.g6e.xlarge", "ml.g6e.2xlarge"),
        {"ModelPackageName": SONIC_ARN},
    )
    for instance_type in ("ml.g6e.xlarge", "ml.g6e.2xlarge"):
        fake_aws.stub_endpoint_quota(f"{instance_type} for endpoint usage", 8.0)
        fake_aws.stub_other_endpoints()
    results = checks(
        fake_aws.clients, with_capacity(settings, fallback_types=["ml.g6e.2xlarge"]), MOTO_ACCOUNT
    )
    by_check = {result.check: (result.status, result.detail) for result in results}
    assert by_check["model package subscription"] == ("pass", f"{SONIC_ARN} can be described (Completed)")
    assert by_check["instance types the model package serves"] == (
        "pass",
        f"ml.g6e.xlarge, ml.g6e.2xlarge, of the 2 types {SONIC_ARN} serves",
    )


def test_each_pool_type_has_its_own_quota(fake_aws: FakeAws, settings: Settings) -> None:
    fake_aws.stub_endpoint_quota("ml.g6e.2xlarge for endpoint usage", 8.0)
    pooled = with_capacity(settings, fallback_types=["ml.g6e.2xlarge"])
    result = check_endpoint_quota(
        fake_aws.clients.service_quotas, fake_aws.clients.sagemaker, pooled, "ml.g6e.2xlarge"
    )
    assert (result.check, result.status) == ("quota: ml.g6e.2xlarge for endpoint usage", "pass")


def test_preflight_checks_every_type_and_the_plan(
    fake_aws: FakeAws, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sonic_deploy.routes.sagemaker import preflight

    seen: list[tuple[str, str | None]] = []
    monkeypatch.setattr(preflight, "describe_model_package", lambda *args: seen.append(("describe", None)))
    monkeypatch.setattr(preflight, "check_model_package", lambda *args: seen.append(("package", None)))
    monkeypatch.setattr(preflight, "check_package_types", lambda *args: seen.append(("types", None)))
    monkeypatch.setattr(preflight, "check_endpoint_quota", lambda *args: seen.append(("quota", args[3])))
    monkeypatch.setattr(preflight, "check_reservation", lambda *args: seen.append(("plan", None)))
    monkeypatch.setattr(
        preflight, "check_zones_offer_hardware", lambda *args: seen.append(("zones", args[2]))
    )
    monkeypatch.setattr(preflight, "check_endpoint_log_group", lambda *args: seen.append(("logs", None)))
    checks(fake_aws.clients, with_capacity(settings, fallback_types=["ml.g6e.2xlarge"]), MOTO_ACCOUNT)
    assert seen == [
        ("plan", None),
        ("describe", None),
        ("package", None),
        ("types", None),
        ("quota", "ml.g6e.xlarge"),
        ("quota", "ml.g6e.2xlarge"),
        ("zones", "ml.g6e.xlarge"),
        ("zones", "ml.g6e.2xlarge"),
        ("logs", None),
    ]
