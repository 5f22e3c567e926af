"""Checks for the SageMaker Marketplace route: the subscribed model package and the endpoint instance quota;
`after_deploy`, what only the deployed endpoint shows, is in preflight_deployed.py."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from sonic_deploy.config import Settings
from sonic_deploy.preflight.capacity_in_use import InUse, endpoint_instances_in_use
from sonic_deploy.preflight.quotas import BLUE_GREEN_FACTOR, increase_command, quota_by_name
from sonic_deploy.preflight.results import (
    CheckResult,
    aws_error,
    error_code,
    error_message,
    failed,
    passed,
    skipped,
)
from sonic_deploy.routes.sagemaker.preflight_deployed import after_deploy as after_deploy

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_logs import CloudWatchLogsClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_sagemaker.type_defs import DescribeModelPackageOutputTypeDef
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_service_quotas import ServiceQuotasClient

    from sonic_deploy.preflight.runner import AwsClients

NOT_SUBSCRIBED = "not subscribed to the marketplace offering"


@dataclass(frozen=True)
class PackageAnswer:
    """DescribeModelPackage on the configured ARN, asked once a run for the two checks that read it: what it
    returned, or the error it raised (neither when no ARN is configured)."""

    arn: str | None
    package: DescribeModelPackageOutputTypeDef | None = None
    error: ClientError | None = None


def describe_model_package(sagemaker: SageMakerClient, arn: str | None) -> PackageAnswer:
    if arn is None:
        return PackageAnswer(arn)
    try:
        return PackageAnswer(arn, package=sagemaker.describe_model_package(ModelPackageName=arn))
    except ClientError as error:
        return PackageAnswer(arn, error=error)


def check_model_package(answer: PackageAnswer, settings: Settings, account: str) -> CheckResult:
    check = "model package subscription"
    arn = answer.arn
    version, region = settings.environment.sonic_version, settings.environment.region
    if arn is None:  # the loader refuses a SageMaker environment without one; kept for a direct caller
        return failed(
            check,
            f"no model-package ARN for {version} in {region}",
            f'add `{region} = "<ARN>"` under [versions."{version}"] in config/model_packages.toml',
        )
    if answer.error is not None:
        error = answer.error
        message = error_message(error)
        if NOT_SUBSCRIBED in message.casefold():
            return failed(
                check,
                f"account {account} is not subscribed to {arn} ({message})",
                "subscribe to the Cartesia Sonic listing on AWS Marketplace with this account "
                "(Continue to subscribe, accept the offer), wait until the subscription is active, re-run",
            )
        if "does not exist" in message or "not found" in message.casefold():
            return failed(
                check,
                f"{arn} does not exist in {region} ({message})",
                "copy the ARN shown under SageMaker AI > Model packages > My subscriptions in "
                f"{region} into config/model_packages.toml",
            )
        return aws_error(check, error, "sagemaker:DescribeModelPackage")
    status = answer.package.get("ModelPackageStatus", "unknown") if answer.package else "unknown"
    if status != "Completed":
        return failed(
            check,
            f"{arn} is in state {status}, not Completed",
            "wait for the package to complete, or pick another Sonic version's ARN",
        )
    return passed(check, f"{arn} can be described ({status})")


def check_endpoint_quota(
    quotas: ServiceQuotasClient,
    sagemaker_client: SageMakerClient,
    settings: Settings,
    instance_type: str | None = None,
) -> CheckResult:
    """`instance_type`'s quota (default `sagemaker.instance_type`): any pool's type may hold every instance."""
    sagemaker = settings.environment.sagemaker
    instance_type, region = instance_type or sagemaker.instance_type, settings.environment.region
    name = f"{instance_type} for endpoint usage"
    check = f"quota: {name}"
    try:
        quota = quota_by_name(quotas, "sagemaker", name)
    except ClientError as error:
        return aws_error(check, error, "servicequotas:ListServiceQuotas")
    if quota is None:
        return failed(
            check,
            f"Service Quotas has no quota named '{name}' in {region}",
            f"check that SageMaker offers {instance_type} for endpoints in {region}, or change "
            "sagemaker.instance_type",
        )
    try:
        elsewhere = endpoint_instances_in_use(sagemaker_client, instance_type, settings.endpoint_name)
        used_text = f"{elsewhere.amount} on {elsewhere.holders} other endpoints"
    except ClientError as error:
        elsewhere = InUse(0, 0)
        used_text = f"other endpoints' use unknown ({error_code(error)}: sagemaker:ListEndpoints)"
    needed = sagemaker.max_instances * BLUE_GREEN_FACTOR + elsewhere.amount
    source = "applied" if quota.applied else "AWS default"
    detail = (
        f"{quota.value:g} instances ({source}); needs {needed}: max_instances {sagemaker.max_instances} "
        f"x {BLUE_GREEN_FACTOR} for a blue/green update, + {used_text}"
    )
    if quota.value < needed:
        return failed(
            check, detail, f"request {needed}: {increase_command('sagemaker', quota, needed, region)}"
        )
    return passed(check, detail)


def check_zones_offer_hardware(
    ec2: EC2Client, settings: Settings, instance_type: str | None = None
) -> CheckResult:
    """SageMaker has no per-AZ offering API; EC2's offering of the same hardware is the closest evidence."""
    instance_type = instance_type or settings.environment.sagemaker.instance_type
    hardware = instance_type.removeprefix("ml.")
    zones = settings.environment.network.zones
    check = f"{hardware} hardware in the endpoint's AZs"
    try:
        offers = ec2.describe_instance_type_offerings(
            LocationType="availability-zone", Filters=[{"Name": "instance-type", "Values": [hardware]}]
        )["InstanceTypeOfferings"]
    except ClientError as error:
        return aws_error(check, error, "ec2:DescribeInstanceTypeOfferings")
    offered = sorted(str(offer.get("Location")) for offer in offers)
    lacking = [zone for zone in zones if zone not in offered]
    if lacking:
        return failed(
            check,
            f"EC2 does not offer {hardware} (the hardware behind {instance_type}) in {', '.join(lacking)}; "
            f"it does in {', '.join(offered) or 'no AZ of this Region'}",
            f"name AZs from {', '.join(offered) or '(none: choose another Region)'} in the environment's "
            "network availability_zones",
        )
    return passed(
        check,
        f"EC2 offers {hardware} in {', '.join(zones)} (SageMaker's own per-AZ capacity is not queryable)",
    )


def check_endpoint_log_group(
    logs: CloudWatchLogsClient, cloudformation: CloudFormationClient, settings: Settings
) -> CheckResult:
    """The stack creates the endpoint's log group under the name SageMaker writes to. SageMaker also creates
    that group itself when an endpoint logs, so one can outlive an earlier endpoint of the same name (or one
    torn down with the stack while it was still logging); a first create then fails with "... already
    exists". Only a stack that is not deployed yet can meet that."""
    group = f"/aws/sagemaker/Endpoints/{settings.endpoint_name}"
    check = f"log group {group}"
    stack = settings.stack_name("sagemaker")
    try:
        cloudformation.describe_stacks(StackName=stack)
        return passed(check, f"owned by the deployed stack {stack}")
    except ClientError as error:
        if "does not exist" not in error_message(error):
            return aws_error(check, error, "cloudformation:DescribeStacks")
    try:
        found = logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"]
    except ClientError as error:
        return aws_error(check, error, "logs:DescribeLogGroups")
    if any(g.get("logGroupName") == group for g in found):
        return failed(
            check,
            "left behind by an earlier endpoint of this name: the stack's first create would fail with "
            "'already exists'",
            f"keep its logs elsewhere if you need them, then `aws logs delete-log-group --log-group-name {group} "
            f"--region {settings.environment.region}`; or set sagemaker.endpoint_name to a new name",
        )
    return passed(check, "free for the stack to create")


def check_package_types(answer: PackageAnswer, settings: Settings) -> CheckResult:
    """The types the endpoint may run on are ones the subscribed package lists for real-time inference."""
    check = "instance types the model package serves"
    wanted = [pool.instance_type for pool in settings.sagemaker_pools]
    arn, package = answer.arn, answer.package
    if package is None:
        return skipped(check, "the package cannot be described (the subscription check says why)")
    served = package.get("InferenceSpecification", {}).get("SupportedRealtimeInferenceInstanceTypes", [])
    if not served:
        return skipped(check, f"{arn} lists no real-time instance types")
    missing = [t for t in wanted if t not in served]
    if missing:
        return failed(
            check,
            f"{arn} does not serve {', '.join(missing)} in real time; it serves {', '.join(served)}",
            "use those in sagemaker.instance_type and sagemaker.capacity.fallback_types (and the catalogue's "
            f'[model_package."{settings.environment.sonic_version}"])',
        )
    return passed(check, f"{', '.join(wanted)}, of the {len(served)} types {arn} serves")


def check_reservation(sagemaker: SageMakerClient, settings: Settings) -> CheckResult | None:
    """The training plan of `sagemaker.capacity.ml_reservation_arn`, if any: active, for endpoints, of the
    endpoint's type, and big enough (Developer Guide, "Using training plans for SageMaker inference
    endpoints": "The training plan must be in the Active status")."""
    sm = settings.environment.sagemaker
    arn = sm.capacity.ml_reservation_arn
    if arn is None:
        return None
    name = arn.rsplit("/", 1)[1]
    check = f"training plan {name}"
    try:
        plan = sagemaker.describe_training_plan(TrainingPlanName=name)
    except ClientError as error:
        return aws_error(check, error, "sagemaker:DescribeTrainingPlan")
    status, end = plan.get("Status", "unknown"), plan.get("EndTime")
    window = f"{plan.get('StartTime', '?')} to {end or '?'}"
    summaries = plan.get("ReservedCapacitySummaries", [])
    types = sorted({s.get("InstanceType", "?") for s in summaries})
    ours = [s for s in summaries if s.get("InstanceType") == sm.instance_type]
    total = sum(s.get("TotalInstanceCount", 0) for s in ours)
    # An update is blue/green: a second fleet as large as the first, and under capacity-reservations-only it
    # too comes from the plan only.
    needed = sm.min_instances * BLUE_GREEN_FACTOR
    zones = settings.environment.network.zones
    elsewhere = sorted({z for s in ours if (z := s.get("AvailabilityZone")) and z not in zones})
    problems = []
    if status != "Active":
        problems.append(f"it is {status}, not Active ({window})")
    if end is not None and end <= datetime.datetime.now(datetime.UTC):
        problems.append(f"it ended at {end}")
    if "endpoint" not in plan.get("TargetResources", []):
        problems.append(f"it is for {', '.join(plan.get('TargetResources', [])) or 'nothing'}, not endpoints")
    if not ours:
        problems.append(f"it reserves {', '.join(types) or 'no type'}, not {sm.instance_type}")
    elif total < needed:
        problems.append(
            f"it holds {total} x {sm.instance_type}, fewer than min_instances {sm.min_instances} x "
            f"{BLUE_GREEN_FACTOR} (a blue/green update starts a second fleet from the plan)"
        )
    if elsewhere:
        problems.append(
            f"its instances are in {', '.join(elsewhere)}, not the endpoint's AZs ({', '.join(zones)})"
        )
    if problems:
        return failed(
            check,
            "; ".join(problems),
            "name an Active training plan for endpoints of that type (aws sagemaker list-training-plans), "
            "or remove sagemaker.capacity.ml_reservation_arn",
        )
    return passed(
        check,
        f"Active until {end}: {total} x {sm.instance_type}; scaling past {total // BLUE_GREEN_FACTOR} instances "
        f"(max_instances {sm.max_instances}) or an update larger than that fails (capacity-reservations-only)",
    )


def checks(clients: AwsClients, settings: Settings, account: str) -> list[CheckResult]:
    """The SageMaker route's part of `sonic-deploy preflight`, in the order a newcomer would fix them."""
    types = [pool.instance_type for pool in settings.sagemaker_pools]
    reservation = check_reservation(clients.sagemaker, settings)
    package = describe_model_package(clients.sagemaker, settings.model_package_arn)
    return [
        check_model_package(package, settings, account),
        *([check_package_types(package, settings)] if len(types) > 1 else []),
        *(check_endpoint_quota(clients.service_quotas, clients.sagemaker, settings, t) for t in types),
        *([reservation] if reservation is not None else []),
        *(check_zones_offer_hardware(clients.ec2, settings, t) for t in types),
        check_endpoint_log_group(clients.logs, clients.cloudformation, settings),
    ]


def before_deploy(settings: Settings, secretsmanager: SecretsManagerClient) -> list[CheckResult]:
    """Nothing of this route's fails minutes into a deploy that a call could tell first."""
    return []
