"""`sonic-deploy preflight --after-deploy sagemaker`'s checks: the deployed stack, its endpoint and instance pools,
each pool type's concurrency series and the scaling alarms, against Stubber (tests/preflight/deployed_aws.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sonic_deploy.config import Settings
from sonic_deploy.preflight.after_deploy import after_deploy
from sonic_deploy.routes.sagemaker.preflight_deployed import (
    check_endpoint,
    check_instance_pools,
    check_pool_metrics,
    check_scaling_alarms,
    check_stack,
)
from tests.preflight.conftest import with_capacity
from tests.preflight.deployed_aws import (
    ACCOUNT,
    CONFIG,
    DEPLOYED,
    ENDPOINT,
    PLAN,
    PREFIX,
    REGION,
    STACK,
    VARIANT,
    XL,
    XL2,
    Aws,
    alarm,
    alarms,
    endpoint,
    endpoint_config,
    identity,
    metrics,
    results,
    series,
    stack,
)


@pytest.fixture
def pooled(settings: Settings) -> Settings:
    return with_capacity(settings, fallback_types=[XL2])


def test_a_pooled_endpoint_as_configured_passes_every_check(aws: Aws, pooled: Settings) -> None:
    identity(aws)
    stack(aws)
    endpoint(aws, pools=((XL, 2), (XL2, 0)))
    endpoint_config(aws, XL, XL2)
    metrics(aws, [series(), series(XL)], [series(XL2)])  # the second type's series on the second page
    alarms(
        aws,
        alarm("High", "OK", "ConcurrentRequestsPerModel", math=True),
        alarm("Low", "ALARM", "ConcurrentRequestsPerModel", math=True),
        alarm("High", "OK", "GPUUtilization", math=True),
    )
    exact = "a series with exactly EndpointName, VariantName, InstanceType, as the pools' scaling reads it"
    assert results(after_deploy(aws.clients, pooled, "sagemaker")) == [
        (
            "credentials and account",
            "pass",
            f"account {ACCOUNT} as arn:aws:iam::{ACCOUNT}:user/ops (config/environments/dev.toml names "
            "no account: deploying into this one)",
        ),
        (f"stack {STACK}", "pass", f"UPDATE_COMPLETE: endpoint {ENDPOINT}, variant {VARIANT}"),
        (f"endpoint {ENDPOINT}", "pass", f"InService: variant {VARIANT}, 2 instance(s)"),
        (
            f"instance pools of {ENDPOINT}",
            "pass",
            f"{XL} (2 running), {XL2} (0 running) by priority",
        ),
        (f"ConcurrentRequestsPerModel of {XL}", "pass", exact),
        (f"ConcurrentRequestsPerModel of {XL2}", "pass", exact),
        (
            f"target-tracking alarms of endpoint/{ENDPOINT}/variant/{VARIANT}",
            "pass",
            "ConcurrentRequestsPerModel: High OK, Low ALARM; GPUUtilization: High OK",
        ),
    ]


def test_series_with_other_dimensions_fail_and_are_named(aws: Aws, pooled: Settings) -> None:
    # What a third party saw: the InstanceType series only with AvailabilityZone and Region as well.
    metrics(aws, [series(), series(XL, AvailabilityZone="us-east-2a", Region=REGION)])
    first, second = check_pool_metrics(aws.clients.cloudwatch, pooled, DEPLOYED)
    assert (first.check, first.status) == (f"ConcurrentRequestsPerModel of {XL}", "fail")
    assert first.detail == (
        "no series with exactly EndpointName, VariantName, InstanceType; its series have {AvailabilityZone, "
        "EndpointName, InstanceType, Region, VariantName}"
    )
    assert first.fix.startswith("the pools' scaling and alarms match none of them: remove")
    # A type that has had no instances has no series: no data yet, not a failure.
    assert (second.status, second.detail) == (
        "skipped",
        "no data yet (the endpoint's series have {AvailabilityZone, EndpointName, InstanceType, Region, "
        "VariantName} and {EndpointName, VariantName}): a type without instances has none; send traffic and "
        "re-run",
    )


def test_one_type_has_no_series_to_check(aws: Aws, settings: Settings) -> None:
    assert check_pool_metrics(aws.clients.cloudwatch, settings, DEPLOYED) == []  # and no call


def test_pools_out_of_order_or_not_on_the_variant_fail(aws: Aws, pooled: Settings) -> None:
    endpoint(aws)  # the variant's summary lists no InstancePools
    endpoint_config(aws, XL2, XL)
    _, described = check_endpoint(aws.clients.sagemaker, DEPLOYED)
    assert described is not None
    result = check_instance_pools(aws.clients.sagemaker, pooled, DEPLOYED, described)
    assert (result.status, result.detail) == (
        "fail",
        f"endpoint config {CONFIG} has pools {XL2}, {XL} by priority, not {XL}, {XL2}; describe-endpoint shows "
        "no InstancePools on the variant",
    )
    assert result.fix.startswith("`make diff ENV=dev ROUTE=sagemaker LIVE=1`: deploy what differs")


@pytest.mark.parametrize(
    ("applied", "status", "detail"),
    [
        (PLAN, "pass", f"instances from {PLAN}"),
        (None, "fail", f"its CapacityReservationConfig names no reservation, not {PLAN}"),
    ],
)
def test_a_reservation_must_be_the_variants(
    aws: Aws, settings: Settings, applied: str | None, status: str, detail: str
) -> None:
    endpoint(aws, plan=applied)
    _, described = check_endpoint(aws.clients.sagemaker, DEPLOYED)
    assert described is not None
    reserved = with_capacity(settings, ml_reservation_arn=PLAN)
    result = check_instance_pools(aws.clients.sagemaker, reserved, DEPLOYED, described)  # no endpoint config
    assert (result.status, result.detail) == (status, detail)


def test_without_pools_the_pool_checks_say_so_and_the_alarms_are_checked(
    aws: Aws, settings: Settings
) -> None:
    identity(aws)
    stack(aws)
    endpoint(aws)
    alarms(
        aws,
        alarm("High", "OK", "ConcurrentRequestsPerModel"),
        alarm("Low", "INSUFFICIENT_DATA", "ConcurrentRequestsPerModel"),
        alarm("High", "OK", "GPUUtilization"),
    )
    found = results(after_deploy(aws.clients, settings, "sagemaker"))
    assert found[3] == (
        f"instance pools of {ENDPOINT}",
        "skipped",
        f"none configured (no sagemaker.capacity fallback_types or ml_reservation_arn): {XL} only",
    )
    assert found[4][1:] == (
        "pass",
        "ConcurrentRequestsPerModel: High OK, Low INSUFFICIENT_DATA; GPUUtilization: High OK",
    )
    assert len(found) == 5


def test_a_policy_whose_alarms_have_no_data_fails(aws: Aws) -> None:
    alarms(
        aws,
        alarm("High", "INSUFFICIENT_DATA", "ConcurrentRequestsPerModel", math=True),
        alarm("Low", "INSUFFICIENT_DATA", "ConcurrentRequestsPerModel", math=True),
        alarm("High", "OK", "GPUUtilization", math=True),
    )
    result = check_scaling_alarms(aws.clients.cloudwatch, DEPLOYED, "dev")
    assert (result.status, result.detail) == (
        "fail",
        "no data for ConcurrentRequestsPerModel (ConcurrentRequestsPerModel: High INSUFFICIENT_DATA, Low "
        "INSUFFICIENT_DATA; GPUUtilization: High OK)",
    )
    assert result.fix.startswith("send traffic (`sonic-deploy probe sagemaker --in-vpc dev`)")


def test_no_scaling_alarms_fail_with_the_command_that_lists_the_policies(aws: Aws) -> None:
    alarms(aws)
    result = check_scaling_alarms(aws.clients.cloudwatch, DEPLOYED, "dev")
    assert (result.status, result.detail) == (
        "fail",
        f"no alarm named {PREFIX}*: the stack's scaling policies made none",
    )
    assert f"--resource-id endpoint/{ENDPOINT}/variant/{VARIANT}" in result.fix


def test_an_undeployed_stack_skips_the_rest(aws: Aws, settings: Settings) -> None:
    identity(aws)
    aws.refuse(
        "cloudformation", "describe_stacks", "ValidationError", f"Stack with id {STACK} does not exist"
    )
    found = after_deploy(aws.clients, settings, "sagemaker")
    assert results(found)[1:] == [
        (f"stack {STACK}", "fail", "not deployed in us-east-2"),
        ("the endpoint's checks", "skipped", "they read the deployed stack's outputs"),
    ]
    assert found[1].fix == "make deploy ENV=dev ROUTE=sagemaker, send it traffic, then run this again"


def test_a_stack_without_the_outputs_fails(aws: Aws, settings: Settings) -> None:
    stack(aws, status="ROLLBACK_COMPLETE", outputs=False)
    result, deployed = check_stack(aws.clients.cloudformation, settings)
    assert deployed is None
    assert (result.status, result.detail) == (
        "fail",
        "ROLLBACK_COMPLETE, without the output EndpointName, VariantName",
    )


def test_an_endpoint_deleted_outside_the_stack_fails(aws: Aws, settings: Settings) -> None:
    identity(aws)
    stack(aws)
    missing = f'Could not find endpoint "arn:aws:sagemaker:{REGION}:{ACCOUNT}:endpoint/{ENDPOINT}".'
    aws.refuse("sagemaker", "describe_endpoint", "ValidationException", missing)
    found = after_deploy(aws.clients, settings, "sagemaker")
    assert results(found)[2:] == [
        (f"endpoint {ENDPOINT}", "fail", f"the stack names it, SageMaker has none ({missing})"),
        ("pools, metrics and alarms", "skipped", "they need the endpoint"),
    ]
    assert "`make destroy` and `make deploy` the route" in found[2].fix


@pytest.mark.parametrize(
    ("status", "variant", "detail", "fix"),
    [
        ("Creating", VARIANT, "Creating", "wait until it is InService"),
        (
            "Failed",
            VARIANT,
            "Failed: CapacityError: Unable to provision requested ML compute capacity.",
            "`aws sagemaker describe-endpoint --endpoint-name sonic-dev` shows why",
        ),
        (
            "InService",
            "Other",
            "InService, without the variant AllTraffic",
            "`aws sagemaker describe-endpoint",
        ),
    ],
)
def test_an_endpoint_not_in_service_fails(aws: Aws, status: str, variant: str, detail: str, fix: str) -> None:
    endpoint(aws, status=status, variant=variant)
    result, described = check_endpoint(aws.clients.sagemaker, DEPLOYED)
    assert described is None
    assert (result.status, result.detail) == ("fail", detail)
    assert result.fix.startswith(fix)


def test_an_endpoint_being_updated_passes(aws: Aws) -> None:
    endpoint(aws, status="Updating")
    result, described = check_endpoint(aws.clients.sagemaker, DEPLOYED)
    assert described is not None and (result.status, result.detail) == (
        "pass",
        f"Updating: variant {VARIANT}, 2 instance(s)",
    )


@pytest.mark.parametrize(
    ("service", "operation", "code", "action"),
    [
        ("cloudformation", "describe_stacks", "AccessDenied", "cloudformation:DescribeStacks"),
        ("sagemaker", "describe_endpoint", "AccessDeniedException", "sagemaker:DescribeEndpoint"),
        ("cloudwatch", "list_metrics", "AccessDenied", "cloudwatch:ListMetrics"),
        ("cloudwatch", "describe_alarms", "AccessDenied", "cloudwatch:DescribeAlarms"),
    ],
)
def test_a_missing_permission_names_the_action(
    aws: Aws, pooled: Settings, service: str, operation: str, code: str, action: str
) -> None:
    aws.refuse(service, operation, code, "User is not authorized to perform this action")
    checks: dict[str, Callable[[], Any]] = {
        "describe_stacks": lambda: check_stack(aws.clients.cloudformation, pooled)[0],
        "describe_endpoint": lambda: check_endpoint(aws.clients.sagemaker, DEPLOYED)[0],
        "list_metrics": lambda: check_pool_metrics(aws.clients.cloudwatch, pooled, DEPLOYED)[0],
        "describe_alarms": lambda: check_scaling_alarms(aws.clients.cloudwatch, DEPLOYED, "dev"),
    }
    result = checks[operation]()
    assert (result.status, result.detail) == (
        "fail",
        f"not allowed to call {action}: User is not authorized to perform this action",
    )
    assert result.fix.startswith(f"grant the credentials {action}")


def test_alarms_of_one_policy_only_fail(aws: Aws) -> None:
    """Both policies (streams, GPU) make alarms: one policy's, all with data, is still a policy missing."""
    alarms(
        aws, alarm("High", "OK", "GPUUtilization", math=True), alarm("Low", "OK", "GPUUtilization", math=True)
    )
    result = check_scaling_alarms(aws.clients.cloudwatch, DEPLOYED, "dev")
    assert (result.status, result.detail) == (
        "fail",
        "alarms of 1 of the variant's 2 target-tracking policies (streams, GPU): GPUUtilization: High OK, Low OK",
    )


@pytest.mark.parametrize("status", ["UPDATE_ROLLBACK_FAILED", "DELETE_IN_PROGRESS"])
def test_a_stack_failed_or_being_deleted_fails(aws: Aws, settings: Settings, status: str) -> None:
    stack(aws, status=status)
    result, deployed = check_stack(aws.clients.cloudformation, settings)
    assert deployed is None
    assert (result.status, result.detail) == ("fail", status)
    assert result.fix.startswith(f"`aws cloudformation describe-stack-events --stack-name {STACK}")


def test_the_pools_of_an_endpoint_being_updated_wait_for_it(aws: Aws, pooled: Settings) -> None:
    """While it updates, EndpointConfigName is the config being replaced: its pools would mislead."""
    endpoint(aws, status="Updating", pools=(("ml.g6e.xlarge", 2),))
    _, described = check_endpoint(aws.clients.sagemaker, DEPLOYED)
    assert described is not None
    result = check_instance_pools(aws.clients.sagemaker, pooled, DEPLOYED, described)
    assert (result.status, result.detail) == (
        "skipped",
        "the endpoint is Updating: re-run once it is InService",
    )
