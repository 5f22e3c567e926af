"""Capacity reservations and the GPU AMI, against botocore Stubbers answering with the shapes of botocore's
ec2, ssm and cloudformation models (moto implements neither DescribeCapacityReservations nor AWS's public
ECS AMI parameters as they are)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.stub import Stubber

from sonic_deploy.config import Settings
from sonic_deploy.preflight.results import CheckResult
from sonic_deploy.routes.ecs.config import DEFAULT_GPU_AMI, gpu_ami_parameter
from sonic_deploy.routes.ecs.preflight_capacity import check_gpu_ami, check_reservations
from sonic_deploy.routes.ecs.preflight_targets import EcsTargets, ReservationTarget
from tests.preflight.conftest import ECS, MOTO_ACCOUNT, REGION

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ssm import SSMClient

STACK = "sonic-dev-ecs"
GROUP = "sonic-dev-ecs-GpuPlacementGroup-1A2B3C4D5E6F"
FALLBACK_GROUP = "sonic-dev-ecs-FallbackPlacementGroup-6F5E4D3C2B1A"
CR = "cr-0123456789abcdef0"
FALLBACK = dataclasses.replace(
    ECS,
    more_instance_types=["g6.xlarge"],
    fallback_zone="us-east-2b",
    fallback_instance_types=["g6e.xlarge"],
    fallback_max_instances=4,
)
LISTING = {
    "Filters": [
        {"Name": "availability-zone", "Values": ["us-east-2a"]},
        {"Name": "instance-type", "Values": ["g6e.xlarge"]},
        {"Name": "state", "Values": ["active", "scheduled"]},
    ]
}


def group_arn(name: str) -> str:
    return f"arn:aws:ec2:{REGION}:{MOTO_ACCOUNT}:placement-group/{name}"


def reservation(id: str = CR, **changes: Any) -> dict[str, Any]:
    """A CapacityReservation as DescribeCapacityReservations returns it (botocore's ec2 model)."""
    found: dict[str, Any] = {
        "CapacityReservationId": id,
        "OwnerId": MOTO_ACCOUNT,
        "CapacityReservationArn": f"arn:aws:ec2:{REGION}:{MOTO_ACCOUNT}:capacity-reservation/{id}",
        "AvailabilityZoneId": "use2-az1",
        "InstanceType": "g6e.xlarge",
        "InstancePlatform": "Linux/UNIX",
        "AvailabilityZone": "us-east-2a",
        "Tenancy": "default",
        "TotalInstanceCount": 4,
        "AvailableInstanceCount": 2,
        "EbsOptimized": True,
        "EphemeralStorage": False,
        "State": "active",
        "StartDate": datetime(2026, 11, 1, tzinfo=UTC),
        "EndDateType": "unlimited",
        "InstanceMatchCriteria": "open",
        "CreateDate": datetime(2026, 11, 1, tzinfo=UTC),
        "Tags": [],
        "CapacityAllocations": [],
        "ReservationType": "default",
        "PlacementGroupArn": group_arn(GROUP),
    }
    found.update(changes)
    return {key: value for key, value in found.items() if value is not None}


@dataclasses.dataclass
class Stubbed:
    ec2: EC2Client
    cloudformation: CloudFormationClient
    ssm: SSMClient
    ec2_stub: Stubber
    cloudformation_stub: Stubber
    ssm_stub: Stubber

    def listing(self, *pages: list[dict[str, Any]], request: dict[str, Any] | None = None) -> None:
        """The AZs' reservations, one response a page, each but the last with a NextToken."""
        params = request or LISTING
        for index, page in enumerate(pages):
            response: dict[str, Any] = {"CapacityReservations": page}
            expected = dict(params)
            if index:
                expected["NextToken"] = f"page-{index}"
            if index < len(pages) - 1:
                response["NextToken"] = f"page-{index + 1}"
            self.ec2_stub.add_response("describe_capacity_reservations", response, expected)

    def by_id(self, *found: dict[str, Any], id: str = CR) -> None:
        self.ec2_stub.add_response(
            "describe_capacity_reservations",
            {"CapacityReservations": list(found)},
            {"CapacityReservationIds": [id]},
        )

    def stack(self, outputs: dict[str, str] | None) -> None:
        """The ECS stack with these outputs, or (None) not deployed."""
        if outputs is None:
            self.cloudformation_stub.add_client_error(
                "describe_stacks",
                service_error_code="ValidationError",
                service_message=f"Stack with id {STACK} does not exist",
                http_status_code=400,
            )
            return
        stack = {
            "StackName": STACK,
            "StackId": f"arn:aws:cloudformation:{REGION}:{MOTO_ACCOUNT}:stack/{STACK}/0e7b3f30-0000-0000-0000-000000000000",
            "CreationTime": datetime(2026, 11, 1, tzinfo=UTC),
            "StackStatus": "UPDATE_COMPLETE",
            "Outputs": [{"OutputKey": key, "OutputValue": value} for key, value in outputs.items()],
        }
        self.cloudformation_stub.add_response("describe_stacks", {"Stacks": [stack]}, {"StackName": STACK})


@pytest.fixture
def aws() -> Iterator[Stubbed]:
    session = boto3.Session(region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")
    ec2, cloudformation, ssm = session.client("ec2"), session.client("cloudformation"), session.client("ssm")
    with Stubber(ec2) as e, Stubber(cloudformation) as c, Stubber(ssm) as s:
        yield Stubbed(ec2, cloudformation, ssm, e, c, s)
        e.assert_no_pending_responses()
        c.assert_no_pending_responses()
        s.assert_no_pending_responses()


def run(aws: Stubbed, settings: Settings, targets: EcsTargets) -> list[CheckResult]:
    return check_reservations(aws.ec2, aws.cloudformation, settings, targets)


def configured(**changes: Any) -> EcsTargets:
    target = ReservationTarget(CR, "us-east-2a", "g6e.xlarge", "on-demand")
    preference = changes.pop("preference", "open")
    return dataclasses.replace(
        ECS, reservations=[dataclasses.replace(target, **changes)], reservation_preference=preference
    )


def test_no_reservations_configured_shows_what_the_account_has_across_pages(
    aws: Stubbed, settings: Settings
) -> None:
    aws.listing(
        [reservation(EndDate=datetime(2026, 12, 31, 12, 0, tzinfo=UTC), EndDateType="limited")],
        [
            reservation(
                "cr-0fedcba9876543210",
                InstanceMatchCriteria="targeted",
                ReservationType="capacity-block",
                PlacementGroupArn=None,
                State="scheduled",
                AvailableInstanceCount=4,
                StartDate=datetime(2026, 12, 10, 11, 30, tzinfo=UTC),
            )
        ],
    )
    (result,) = run(aws, settings, ECS)
    assert (result.check, result.status) == ("capacity reservations in us-east-2a", "pass")
    assert result.detail.startswith(
        f"{CR} g6e.xlarge in us-east-2a: 2/4 available, open, default, placement group {GROUP}, active, "
        "ends 2026-12-31 12:00 UTC; cr-0fedcba9876543210 g6e.xlarge in us-east-2a: 4/4 available, targeted, "
        "capacity-block, placement group none, scheduled from 2026-12-10 11:30 UTC, no end date ("
    )


def test_none_in_the_account(aws: Stubbed, settings: Settings) -> None:
    aws.listing([])
    (result,) = run(aws, settings, ECS)
    assert (result.status, result.detail) == (
        "pass",
        "none active or scheduled for g6e.xlarge (instances launch without one)",
    )


def test_with_reservations_none_the_listing_says_none_is_used(aws: Stubbed, settings: Settings) -> None:
    aws.listing([reservation()])
    (result,) = run(aws, settings, dataclasses.replace(ECS, reservation_preference="none"))
    assert result.detail.endswith('(reservations = "none": the stack uses none of them)')


def test_a_stack_that_cannot_be_read_leaves_the_placement_group_unchecked(
    aws: Stubbed, settings: Settings
) -> None:
    aws.listing([reservation()])
    aws.cloudformation_stub.add_client_error(
        "describe_stacks", service_error_code="AccessDenied", service_message="no", http_status_code=403
    )
    _, result = run(aws, settings, configured())
    assert result.status == "skipped"
    assert result.detail.endswith(
        "its placement group cannot be checked: the stack's placement groups unknown "
        "(AccessDenied: cloudformation:DescribeStacks)"
    )


def test_the_fallback_zone_and_every_type_are_listed(aws: Stubbed, settings: Settings) -> None:
    aws.listing(
        [],
        request={
            "Filters": [
                {"Name": "availability-zone", "Values": ["us-east-2a", "us-east-2b"]},
                {"Name": "instance-type", "Values": ["g6e.xlarge", "g6.xlarge"]},
                {"Name": "state", "Values": ["active", "scheduled"]},
            ]
        },
    )
    (result,) = run(aws, settings, FALLBACK)
    assert result.check == "capacity reservations in us-east-2a, us-east-2b"


def test_access_denied_names_the_permission(aws: Stubbed, settings: Settings) -> None:
    aws.ec2_stub.add_client_error(
        "describe_capacity_reservations",
        service_error_code="UnauthorizedOperation",
        service_message="You are not authorized to perform this operation.",
        http_status_code=403,
    )
    (result,) = run(aws, settings, configured())
    assert result.status == "fail"
    assert result.detail.startswith("not allowed to call ec2:DescribeCapacityReservations")
    assert "grant the credentials ec2:DescribeCapacityReservations" in result.fix


def test_configured_reservation_in_the_stacks_placement_group_passes(
    aws: Stubbed, settings: Settings
) -> None:
    aws.listing([reservation()])
    aws.stack({"PlacementGroupName": GROUP})
    listing, result = run(aws, settings, configured())
    assert listing.status == "pass"
    assert (result.check, result.status) == (f"reservation {CR}", "pass")
    assert result.detail.endswith(": matches the config and the stack's placement group")


def test_before_the_first_deploy_the_placement_group_is_a_note_not_a_failure(
    aws: Stubbed, settings: Settings
) -> None:
    aws.listing([reservation(PlacementGroupArn=None)])
    aws.stack(None)
    _, result = run(aws, settings, configured())
    assert result.status == "skipped"
    assert f"stack {STACK} is not deployed, so its placement group does not exist yet" in result.detail
    assert "aws ec2 create-capacity-reservation --placement-group-arn" in result.detail


def test_a_stack_without_the_output_is_a_note(aws: Stubbed, settings: Settings) -> None:
    aws.listing([reservation()])
    aws.stack({"ApiUrl": "http://x"})
    _, result = run(aws, settings, configured())
    assert result.status == "skipped"
    assert "has no output PlacementGroupName (deployed before [ecs.capacity])" in result.detail


def test_missing_reservation_fails_with_the_field(aws: Stubbed, settings: Settings) -> None:
    aws.listing([])
    aws.stack({"PlacementGroupName": GROUP})
    aws.ec2_stub.add_client_error(
        "describe_capacity_reservations",
        service_error_code="InvalidCapacityReservationId.NotFound",
        service_message=f"The Capacity Reservation ID '{CR}' does not exist",
        http_status_code=400,
        expected_params={"CapacityReservationIds": [CR]},
    )
    _, result = run(aws, settings, configured())
    assert (result.status, result.detail) == (
        "fail",
        f"no capacity reservation {CR} in us-east-2 (this account)",
    )
    assert f"[[ecs.capacity.reservation]] id = '{CR}' in config/environments/dev.toml" in result.fix


@pytest.mark.parametrize(
    ("found", "config", "problem", "fix"),
    [
        (
            {"State": "expired"},
            {},
            "it is expired, not active or scheduled",
            "use a reservation that is active or scheduled",
        ),
        (
            {"AvailabilityZone": "us-east-2c"},
            {},
            "it is in us-east-2c, the config says availability_zone = 'us-east-2a'",
            "set availability_zone = 'us-east-2c' there",
        ),
        (
            {"InstanceType": "g6.xlarge"},
            {},
            "it reserves g6.xlarge, the config says instance_type = 'g6e.xlarge'",
            "set instance_type = 'g6.xlarge' there",
        ),
        (
            {"ReservationType": "capacity-block"},
            {},
            "it is a capacity-block reservation, which the ECS route's launches cannot use",
            "use an On-Demand Capacity Reservation (kind = 'on-demand')",
        ),
    ],
)
def test_a_reservation_that_is_not_what_the_config_says_fails(
    aws: Stubbed, settings: Settings, found: dict[str, Any], config: dict[str, Any], problem: str, fix: str
) -> None:
    # Not among the usable ones of the AZ and types: looked up by id to say why.
    aws.listing([])
    aws.stack({"PlacementGroupName": GROUP})
    aws.by_id(reservation(**found))
    _, result = run(aws, settings, configured(**config))
    assert result.status == "fail"
    assert result.detail.endswith(f": {problem}")
    assert fix in result.fix


def test_a_targeted_reservation_needs_targeting(aws: Stubbed, settings: Settings) -> None:
    for preference, status in (("open", "fail"), ("targeted", "pass")):
        aws.listing([reservation(InstanceMatchCriteria="targeted")])
        aws.stack({"PlacementGroupName": GROUP})
        _, result = run(aws, settings, configured(preference=preference))
        assert result.status == status, preference
    aws.listing([reservation(InstanceMatchCriteria="targeted")])
    aws.stack({"PlacementGroupName": GROUP})
    _, result = run(aws, settings, configured())
    assert result.fix.endswith('set ecs.capacity.reservations = "targeted"')


@pytest.mark.parametrize(
    ("placement", "found"),
    [(None, "is in no placement group"), (group_arn("someone-elses"), "is in placement group someone-elses")],
)
def test_a_reservation_outside_the_stacks_placement_group_fails(
    aws: Stubbed, settings: Settings, placement: str | None, found: str
) -> None:
    aws.listing([reservation(PlacementGroupArn=placement)])
    aws.stack({"PlacementGroupName": GROUP})
    _, result = run(aws, settings, configured())
    assert result.status == "fail"
    assert result.detail.endswith(f": it {found}, the stack's group in us-east-2a is {GROUP}")
    assert (
        "aws ec2 create-capacity-reservation --region us-east-2 --availability-zone us-east-2a "
        "--instance-type g6e.xlarge --instance-platform Linux/UNIX --instance-count <count> "
        f"--placement-group-arn {group_arn(GROUP)}"
    ) in result.fix


def test_a_fallback_reservation_is_checked_against_the_fallback_group(
    aws: Stubbed, settings: Settings
) -> None:
    target = ReservationTarget(CR, "us-east-2b", "g6e.xlarge")
    targets = dataclasses.replace(FALLBACK, reservations=[target])
    outputs = {"PlacementGroupName": GROUP, "FallbackPlacementGroupName": FALLBACK_GROUP}
    request = {
        "Filters": [
            {"Name": "availability-zone", "Values": ["us-east-2a", "us-east-2b"]},
            {"Name": "instance-type", "Values": ["g6e.xlarge", "g6.xlarge"]},
            {"Name": "state", "Values": ["active", "scheduled"]},
        ]
    }
    for placement, status in ((GROUP, "fail"), (FALLBACK_GROUP, "pass")):
        aws.listing(
            [reservation(AvailabilityZone="us-east-2b", PlacementGroupArn=group_arn(placement))],
            request=request,
        )
        aws.stack(outputs)
        _, result = run(aws, settings, targets)
        assert result.status == status, placement


def test_gpu_ami_published(aws: Stubbed, settings: Settings) -> None:
    parameter = gpu_ami_parameter(DEFAULT_GPU_AMI)
    aws.ssm_stub.add_response(
        "get_parameter",
        {
            "Parameter": {
                "Name": parameter,
                "Type": "String",
                "Value": "ami-0abcdef1234567890",
                "Version": 1,
                "LastModifiedDate": datetime(2026, 8, 21, tzinfo=UTC),
                "ARN": f"arn:aws:ssm:{REGION}::parameter{parameter}",
                "DataType": "aws:ec2:image",
            }
        },
        {"Name": parameter},
    )
    result = check_gpu_ami(aws.ssm, settings, ECS)
    assert (result.check, result.status) == (f"GPU AMI {DEFAULT_GPU_AMI}", "pass")
    assert result.detail == f"ami-0abcdef1234567890 ({parameter})"


def test_gpu_ami_not_published_names_the_field_and_the_fix(aws: Stubbed, settings: Settings) -> None:
    release = "al2023-ami-ecs-gpu-hvm-2023.0.20991231-kernel-6.1-x86_64-ebs"
    aws.ssm_stub.add_client_error(
        "get_parameter",
        service_error_code="ParameterNotFound",
        service_message="",
        http_status_code=400,
        expected_params={"Name": gpu_ami_parameter(release)},
    )
    result = check_gpu_ami(aws.ssm, settings, dataclasses.replace(ECS, ami=release))
    assert result.status == "fail"
    assert result.detail == (
        f"ecs.capacity.ami = '{release}': no SSM parameter "
        f"/aws/service/ecs/optimized-ami/amazon-linux-2023/gpu/{release}/image_id in us-east-2"
    )
    assert result.fix.startswith("set ecs.capacity.ami in config/environments/dev.toml to a release name")
    assert result.fix.endswith('or to "recommended" (AWS\'s newest at each deploy)')
    assert "-kernel-<major>.<minor>-x86_64-ebs" in result.fix


def test_gpu_ami_access_denied(aws: Stubbed, settings: Settings) -> None:
    aws.ssm_stub.add_client_error(
        "get_parameter",
        service_error_code="AccessDeniedException",
        service_message="no",
        http_status_code=400,
    )
    result = check_gpu_ami(aws.ssm, settings, ECS)
    assert (result.status, result.detail) == ("fail", "not allowed to call ssm:GetParameter: no")


def test_the_fix_uses_the_stacks_placement_group_arn_output(aws: Stubbed, settings: Settings) -> None:
    arn = f"arn:aws:ec2:{REGION}:{MOTO_ACCOUNT}:placement-group/{GROUP}-from-output"
    aws.listing([reservation(PlacementGroupArn=None)])
    aws.stack({"PlacementGroupName": GROUP, "PlacementGroupArn": arn})
    _, result = run(aws, settings, configured())
    assert result.status == "fail"
    assert f"--placement-group-arn {arn}," in result.fix
