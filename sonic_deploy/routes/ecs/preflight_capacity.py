"""Checks for where the ECS route's GPU instances come from: capacity reservations and the pinned GPU AMI.

A reservation serves the stack only if it is in the stack's cluster placement group: EC2 cannot move an
existing reservation into a placement group, it has to be created in it (EC2 User Guide, "Use Capacity
Reservations with cluster placement groups", Limitations: docs.aws.amazon.com/AWSEC2/latest/UserGuide/
cr-cpg.html). CloudFormation names the stack's groups, so preflight reads them from the stack's outputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from sonic_deploy.config import Settings
from sonic_deploy.preflight.results import CheckResult, aws_error, error_code, failed, passed, skipped
from sonic_deploy.routes.ecs import outputs
from sonic_deploy.routes.ecs.config import GPU_AMI_RELEASE_FORM, gpu_ami_parameter
from sonic_deploy.routes.ecs.preflight_targets import EcsTargets, ReservationTarget
from sonic_deploy.stack_outputs import describe_stack

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ssm import SSMClient

# States a reservation can be launched into now or at its start ("scheduled": a Capacity Block or a
# future-dated reservation before its start). botocore's ec2 model lists both in CapacityReservationState;
# the `state` filter's own documentation lists only active, expired, cancelled, pending and failed, so that
# the filter takes "scheduled" is UNVERIFIED against AWS (a scheduled reservation would then not be shown).
USABLE_STATES = ("active", "scheduled")
# The stack's outputs naming its cluster placement groups (the first AZ's, the fallback AZ's).
PLACEMENT_GROUP_OUTPUT = outputs.PLACEMENT_GROUP_NAME
FALLBACK_PLACEMENT_GROUP_OUTPUT = outputs.FALLBACK_PREFIX + outputs.PLACEMENT_GROUP_NAME
# DescribeCapacityReservations with an id that names no reservation: the error code the AWS SDKs' users
# branch on (hashicorp/terraform-provider-aws, resource_aws_ec2_capacity_reservation.go); UNVERIFIED here.
NOT_FOUND = "InvalidCapacityReservationId.NotFound"


@dataclass(frozen=True)
class StackGroups:
    """The stack's placement group per AZ, or why preflight cannot know them (`note`)."""

    names: Mapping[str, str]  # AZ -> placement group name
    partition_and_account: tuple[str, str] | None = None
    note: str = ""
    arns: Mapping[str, str] = field(
        default_factory=dict
    )  # AZ -> the group's ARN (outputs ...PlacementGroupArn)


def stack_placement_groups(
    cloudformation: CloudFormationClient, settings: Settings, ecs: EcsTargets
) -> StackGroups:
    """Raises the ClientError of a DescribeStacks failure other than "does not exist"."""
    stack_name = settings.stack_name("ecs")
    stack = describe_stack(cloudformation, stack_name)
    if stack is None:
        return StackGroups(
            {},
            note=f"stack {stack_name} is not deployed, so its placement group does not exist yet: after the first "
            "deploy, create the reservation in it (aws ec2 create-capacity-reservation --placement-group-arn "
            "<the stack's output PlacementGroupArn> ...) and put the new id in "
            "[[ecs.capacity.reservation]]",
        )
    wanted = {ecs.availability_zone: PLACEMENT_GROUP_OUTPUT}
    if ecs.fallback_zone is not None:
        wanted[ecs.fallback_zone] = FALLBACK_PLACEMENT_GROUP_OUTPUT
    missing = stack.missing(wanted.values())
    names = {zone: stack.outputs[output] for zone, output in wanted.items() if output in stack.outputs}
    note = (
        f"stack {stack_name} has no output {', '.join(missing)} (deployed before [ecs.capacity]): deploy it, "
        "then run preflight again"
        if missing
        else ""
    )
    arns = {
        zone: stack.outputs[output.replace("Name", "Arn")]
        for zone, output in wanted.items()
        if output.replace("Name", "Arn") in stack.outputs
    }
    return StackGroups(names, stack.partition_and_account, note, arns)


def check_reservations(
    ec2: EC2Client, cloudformation: CloudFormationClient, settings: Settings, ecs: EcsTargets
) -> list[CheckResult]:
    """What the account has reserved in the GPU groups' AZs for their types, then each configured
    `[[ecs.capacity.reservation]]` against what EC2 says it is."""
    zones = [zone for zone, _ in ecs.zones_and_types]
    types = list(dict.fromkeys(t for _, group in ecs.zones_and_types for t in group))
    check = f"capacity reservations in {', '.join(zones)}"
    try:
        found = _reservations(
            ec2,
            Filters=[
                {"Name": "availability-zone", "Values": zones},
                {"Name": "instance-type", "Values": types},
                {"Name": "state", "Values": list(USABLE_STATES)},
            ],
        )
    except ClientError as error:
        return [aws_error(check, error, "ec2:DescribeCapacityReservations")]
    results = [_listing(check, found, types, ecs)]
    if not ecs.reservations:
        return results
    try:
        groups = stack_placement_groups(cloudformation, settings, ecs)
    except ClientError as error:
        groups = StackGroups(
            {},
            note=f"the stack's placement groups unknown ({error_code(error)}: cloudformation:DescribeStacks)",
        )
    by_id = {str(r.get("CapacityReservationId")): r for r in found}
    env_file = f"config/environments/{settings.environment_name}.toml"
    for target in ecs.reservations:
        reservation: Mapping[str, Any] | None = by_id.get(target.id)
        if reservation is None:  # not usable in those AZs and types: ask for it by id to say why
            try:
                described = _reservations(ec2, CapacityReservationIds=[target.id])
            except ClientError as error:
                if error_code(error) != NOT_FOUND:
                    results.append(
                        aws_error(f"reservation {target.id}", error, "ec2:DescribeCapacityReservations")
                    )
                    continue
                described = []
            reservation = described[0] if described else None
        results.append(_configured(target, reservation, groups, ecs, settings.environment.region, env_file))
    return results


def _reservations(ec2: EC2Client, **request: Any) -> list[Mapping[str, Any]]:
    found: list[Mapping[str, Any]] = []
    for page in ec2.get_paginator("describe_capacity_reservations").paginate(**request):
        found.extend(page.get("CapacityReservations", []))
    return found


def _describe(reservation: Mapping[str, Any]) -> str:
    """One reservation as the listing shows it."""
    end = reservation.get("EndDate")
    ends = f"ends {end:%Y-%m-%d %H:%M} UTC" if isinstance(end, datetime) else "no end date"
    group = str(reservation.get("PlacementGroupArn") or "")
    state = str(reservation.get("State", "?"))
    start = reservation.get("StartDate")
    starts = (
        f" from {start:%Y-%m-%d %H:%M} UTC" if state == "scheduled" and isinstance(start, datetime) else ""
    )
    return (
        f"{reservation.get('CapacityReservationId')} {reservation.get('InstanceType')} in "
        f"{reservation.get('AvailabilityZone')}: {reservation.get('AvailableInstanceCount', '?')}/"
        f"{reservation.get('TotalInstanceCount', '?')} available, {reservation.get('InstanceMatchCriteria', '?')}, "
        f"{reservation.get('ReservationType', 'default')}, placement group "
        f"{group.rsplit('/', 1)[-1] if group else 'none'}, {state}{starts}, {ends}"
    )


def _listing(check: str, found: list[Mapping[str, Any]], types: list[str], ecs: EcsTargets) -> CheckResult:
    if not found:
        return passed(
            check, f"none active or scheduled for {', '.join(types)} (instances launch without one)"
        )
    shown = "; ".join(_describe(r) for r in found)
    if ecs.reservation_preference == "none":
        return passed(check, f'{shown} (reservations = "none": the stack uses none of them)')
    return passed(
        check,
        f"{shown} (the stack's instances launch in its cluster placement groups: only a reservation made "
        "for that group serves them)",
    )


def _configured(
    target: ReservationTarget,
    reservation: Mapping[str, Any] | None,
    groups: StackGroups,
    ecs: EcsTargets,
    region: str,
    env_file: str,
) -> CheckResult:
    check = f"reservation {target.id}"
    where = f"[[ecs.capacity.reservation]] id = {target.id!r} in {env_file}"
    if reservation is None:
        return failed(
            check,
            f"no capacity reservation {target.id} in {region} (this account)",
            f"correct or remove {where} (aws ec2 describe-capacity-reservations --region {region} lists them)",
        )
    problems: list[str] = []
    fixes: list[str] = []
    state = str(reservation.get("State", ""))
    if state not in USABLE_STATES:
        problems.append(f"it is {state}, not active or scheduled")
        fixes.append("use a reservation that is active or scheduled")
    zone, instance_type = str(reservation.get("AvailabilityZone")), str(reservation.get("InstanceType"))
    if zone != target.availability_zone:
        problems.append(f"it is in {zone}, the config says availability_zone = {target.availability_zone!r}")
        fixes.append(
            f"set availability_zone = {zone!r} there, or use a reservation in {target.availability_zone}"
        )
    if instance_type != target.instance_type:
        problems.append(
            f"it reserves {instance_type}, the config says instance_type = {target.instance_type!r}"
        )
        fixes.append(
            f"set instance_type = {instance_type!r} there, or use a reservation of {target.instance_type}"
        )
    reservation_type = str(reservation.get("ReservationType", "default"))
    if reservation_type != "default":
        problems.append(f"it is a {reservation_type} reservation, which the ECS route's launches cannot use")
        fixes.append("use an On-Demand Capacity Reservation (kind = 'on-demand')")
    if reservation.get("InstanceMatchCriteria") == "targeted" and ecs.reservation_preference == "open":
        problems.append('it only takes instances that target it, and ecs.capacity.reservations = "open"')
        fixes.append('set ecs.capacity.reservations = "targeted"')
    group_problem, group_fix = _group_mismatch(target, reservation, groups, region)
    if group_problem:
        problems.append(group_problem)
        fixes.append(group_fix)
    summary = _describe(reservation)
    if problems:
        return failed(check, f"{summary}: {'; '.join(problems)}", f"in {where}: {'; '.join(fixes)}")
    if groups.note and target.availability_zone not in groups.names:
        return skipped(
            check, f"{summary}: matches the config; its placement group cannot be checked: {groups.note}"
        )
    return passed(check, f"{summary}: matches the config and the stack's placement group")


def _group_mismatch(
    target: ReservationTarget, reservation: Mapping[str, Any], groups: StackGroups, region: str
) -> tuple[str, str]:
    """Whether the reservation is in the placement group of the stack's group in its AZ ("" when it is, or
    when the stack's group is unknown)."""
    expected = groups.names.get(target.availability_zone)
    if expected is None:
        return "", ""
    arn = str(reservation.get("PlacementGroupArn") or "")
    actual = arn.rsplit("placement-group/", 1)[-1] if arn else None
    if actual == expected:
        return "", ""
    partition, account = groups.partition_and_account or ("aws", "<account>")
    group_arn = groups.arns.get(
        target.availability_zone, f"arn:{partition}:ec2:{region}:{account}:placement-group/{expected}"
    )
    found = f"is in placement group {actual}" if actual else "is in no placement group"
    how = (
        f"create a reservation in the stack's group (an existing one cannot be moved into it): aws ec2 "
        f"create-capacity-reservation --region {region} --availability-zone {target.availability_zone} "
        f"--instance-type {target.instance_type} --instance-platform Linux/UNIX --instance-count <count> "
        f"--placement-group-arn {group_arn}, and put its id here"
    )
    return f"it {found}, the stack's group in {target.availability_zone} is {expected}", how


def check_gpu_ami(ssm: SSMClient, settings: Settings, ecs: EcsTargets) -> CheckResult:
    """The GPU AMI release the config pins is published in the Region (the stack reads the same parameter)."""
    parameter = gpu_ami_parameter(ecs.ami)
    check = f"GPU AMI {ecs.ami}"
    region = settings.environment.region
    try:
        found = ssm.get_parameter(Name=parameter)["Parameter"]
    except ClientError as error:
        if error_code(error) == "ParameterNotFound":
            return failed(
                check,
                f"ecs.capacity.ami = {ecs.ami!r}: no SSM parameter {parameter} in {region}",
                f"set ecs.capacity.ami in config/environments/{settings.environment_name}.toml to a release "
                f"name from the aws/amazon-ecs-ami releases published in the Region ({GPU_AMI_RELEASE_FORM}), or to "
                '"recommended" (AWS\'s newest at each deploy)',
            )
        return aws_error(check, error, "ssm:GetParameter")
    return passed(check, f"{found.get('Value', '?')} ({parameter})")
