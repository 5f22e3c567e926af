"""Whether EC2 offers each GPU type in the AZ that launches it (ec2:DescribeInstanceTypeOfferings, one call)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from sonic_deploy.preflight.results import CheckResult, aws_error, failed, passed

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client


@dataclass(frozen=True)
class Placement:
    """The GPU types one group launches in one AZ, and the settings that name them (for the fix)."""

    zone: str
    types: list[str]
    zone_field: str  # "eks.availability_zone"
    types_field: str  # "eks.instance_type / eks.capacity.instance_types"


def check_types_offered(ec2: EC2Client, placements: Sequence[Placement]) -> list[CheckResult]:
    """One result per type and AZ, in the placements' order."""
    every_type = list(dict.fromkeys(t for placement in placements for t in placement.types))
    try:
        offered = ec2.describe_instance_type_offerings(
            LocationType="availability-zone",
            Filters=[{"Name": "instance-type", "Values": every_type}],
        )["InstanceTypeOfferings"]
    except ClientError as error:
        return [aws_error(f"{', '.join(every_type)} offered", error, "ec2:DescribeInstanceTypeOfferings")]
    zones_of: dict[str, list[str]] = {}
    for offer in offered:
        zones_of.setdefault(str(offer.get("InstanceType")), []).append(str(offer.get("Location")))
    return [
        _offered_in(instance_type, placement, sorted(zones_of.get(instance_type, [])))
        for placement in placements
        for instance_type in placement.types
    ]


def _offered_in(instance_type: str, placement: Placement, zones: list[str]) -> CheckResult:
    zone = placement.zone
    check = f"{instance_type} offered in {zone}"
    if zone in zones:
        return passed(check, f"offered (also in {', '.join(z for z in zones if z != zone) or 'no other AZ'})")
    if not zones:
        return failed(
            check,
            f"{instance_type} is not offered in any AZ of this Region",
            f"choose another instance type ({placement.types_field}) or Region",
        )
    return failed(
        check,
        f"not offered in {zone}; offered in {', '.join(zones)}",
        f"set {placement.zone_field} to one of {', '.join(zones)}, or drop {instance_type} from "
        f"{placement.types_field}",
    )
