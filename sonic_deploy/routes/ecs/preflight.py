"""Checks for the self-managed ECS route: G-instance vCPU quota, the types in their AZs, images and secrets."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from sonic_deploy.config import Settings
from sonic_deploy.preflight.capacity_in_use import InUse, gpu_vcpus_in_use
from sonic_deploy.preflight.quotas import BLUE_GREEN_FACTOR, increase_command, quota_by_code
from sonic_deploy.preflight.results import CheckResult, aws_error, error_code, failed, passed, skipped
from sonic_deploy.routes.ecs.preflight_capacity import check_gpu_ami, check_reservations
from sonic_deploy.routes.ecs.preflight_targets import EcsTargets, ecs_targets

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ecr import ECRClient
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_service_quotas import ServiceQuotasClient

    from sonic_deploy.preflight.runner import AwsClients

G_AND_VT_QUOTA_CODE = "L-DB2E81BA"  # "Running On-Demand G and VT instances", in vCPUs


def check_gpu_vcpu_quota(
    quotas: ServiceQuotasClient, ec2: EC2Client, settings: Settings, ecs: EcsTargets
) -> CheckResult:
    """Sized for the largest type each group may launch: EC2 picks among them by what it has, so any mix up
    to all-largest can run. With a fallback AZ both groups can run at once, so both count at their most."""
    check = "quota: Running On-Demand G and VT instances"
    if ecs.market == "spot":
        # Spot instances count against the Spot quota, not this one (Service Quotas, EC2: "All G and VT Spot
        # Instance Requests"; its code is not checked here: UNVERIFIED).
        return skipped(
            check,
            'market = "spot": the On-Demand quota does not apply; check "All G and VT Spot Instance Requests" '
            "in the Service Quotas console (not checked here)",
        )
    region = settings.environment.region
    catalogue = settings.catalogue.instance_types
    every_type = ecs.every_instance_type
    unknown = [name for name in every_type if name not in catalogue]
    if unknown:
        return failed(
            check,
            f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not in config/instance_types.toml, "
            "so the vCPUs are unknown",
            f"add a row for {', '.join(unknown)} (gpus, gpu, vcpus, memory_gib)",
        )
    try:
        quota = quota_by_code(quotas, "ec2", G_AND_VT_QUOTA_CODE)
    except ClientError as error:
        return aws_error(check, error, "servicequotas:GetServiceQuota")
    if quota is None:
        return failed(
            check,
            f"Service Quotas does not know {G_AND_VT_QUOTA_CODE} in {region}",
            "check the Region; G instances may not be offered there",
        )
    stack = settings.stack_name("ecs")
    try:
        elsewhere = gpu_vcpus_in_use(ec2, exclude_stack=stack)
        used_text = f"{elsewhere.amount} vCPUs on {elsewhere.holders} G/VT instances outside {stack}"
    except ClientError as error:
        elsewhere = InUse(0, 0)
        used_text = f"G/VT instances already running unknown ({error_code(error)}: ec2:DescribeInstances)"
    needed, parts = elsewhere.amount, []
    groups = [("max_instances", ecs.max_instances, ecs.instance_types)]
    if ecs.fallback_zone is not None:
        groups.append(
            (
                f"fallback ({ecs.fallback_zone}) max_instances",
                ecs.fallback_max_instances,
                ecs.fallback_instance_types,
            )
        )
    for label, count, types in groups:
        largest = max(types, key=lambda name: catalogue[name].vcpus)
        vcpus = catalogue[largest].vcpus
        needed += count * BLUE_GREEN_FACTOR * vcpus
        of_which = f" (the largest of {', '.join(types)})" if len(types) > 1 else ""
        parts.append(
            f"{label} {count} x {BLUE_GREEN_FACTOR} (blue/green) x {vcpus} vCPUs of {largest}{of_which}"
        )
    source = "applied" if quota.applied else "AWS default"
    detail = f"{quota.value:g} vCPUs ({source}); needs {needed}: {' + '.join(parts)}, + {used_text}"
    if quota.value < needed:
        return failed(check, detail, f"request {needed}: {increase_command('ec2', quota, needed, region)}")
    return passed(check, detail)


def check_instance_offered(ec2: EC2Client, ecs: EcsTargets) -> list[CheckResult]:
    """Each GPU type in the AZ whose group launches it: the first AZ's types and the fallback AZ's."""
    every_type = ecs.every_instance_type
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
    results = []
    for zone, types in ecs.zones_and_types:
        for instance_type in types:
            results.append(_offered_in(instance_type, zone, sorted(zones_of.get(instance_type, [])), ecs))
    return results


def _offered_in(instance_type: str, zone: str, zones: list[str], ecs: EcsTargets) -> CheckResult:
    check = f"{instance_type} offered in {zone}"
    if zone in zones:
        return passed(check, f"offered (also in {', '.join(z for z in zones if z != zone) or 'no other AZ'})")
    if zone == ecs.availability_zone:
        field_name = "the ECS availability zone"
        other_types = "ecs.instance_type / ecs.capacity.instance_types"
    else:
        field_name = "ecs.capacity.fallback.availability_zone"
        other_types = "ecs.capacity.fallback.instance_types"
    if not zones:
        return failed(
            check,
            f"{instance_type} is not offered in any AZ of this Region",
            f"choose another instance type ({other_types}) or Region",
        )
    return failed(
        check,
        f"not offered in {zone}; offered in {', '.join(zones)}",
        f"set {field_name} to one of {', '.join(zones)}, or drop {instance_type} from {other_types}",
    )


def check_images(ecr: ECRClient, ecs: EcsTargets) -> list[CheckResult]:
    results = []
    for repository, tag in ecs.images:
        check = f"image {repository}:{tag}"
        try:
            found = ecr.describe_images(repositoryName=repository, imageIds=[{"imageTag": tag}])[
                "imageDetails"
            ]
        except ClientError as error:
            code = error_code(error)
            if code == "RepositoryNotFoundException":
                results.append(
                    failed(
                        check,
                        f"no ECR repository {repository}",
                        f"create it (aws ecr create-repository --repository-name {repository}) and "
                        f"push {repository}:{tag} from Cartesia's bundle",
                    )
                )
            elif code == "ImageNotFoundException":
                results.append(
                    failed(
                        check,
                        f"{repository} has no image tagged {tag}",
                        f"push {repository}:{tag}, or set the configured tag to one that exists",
                    )
                )
            else:
                results.append(aws_error(check, error, "ecr:DescribeImages"))
            continue
        digest = found[0].get("imageDigest", "?") if found else "?"
        results.append(passed(check, f"present ({digest[:19]})"))
    return results


def check_secrets(secrets: SecretsManagerClient, ecs: EcsTargets) -> list[CheckResult]:
    results = []
    for name in ecs.secret_names:
        check = f"secret {name}"
        try:
            secret = secrets.describe_secret(SecretId=name)
        except ClientError as error:
            if error_code(error) == "ResourceNotFoundException":
                results.append(
                    failed(
                        check,
                        f"no secret named {name}",
                        f"create it: aws secretsmanager create-secret --name {name} --secret-string ...",
                    )
                )
            else:
                results.append(aws_error(check, error, "secretsmanager:DescribeSecret"))
            continue
        if secret.get("DeletedDate") is not None:
            results.append(
                failed(
                    check,
                    f"{name} is scheduled for deletion on {secret['DeletedDate']:%Y-%m-%d}",
                    f"restore it: aws secretsmanager restore-secret --secret-id {name}",
                )
            )
        else:
            results.append(passed(check, "exists"))
    return results


def checks(clients: AwsClients, settings: Settings, account: str) -> list[CheckResult]:
    """The ECS route's part of `sonic-deploy preflight`, in the order a newcomer would fix them."""
    ecs = ecs_targets(settings)
    assert ecs is not None, "preflight asks a route's checks only when the environment deploys it"
    results = [check_gpu_vcpu_quota(clients.service_quotas, clients.ec2, settings, ecs)]
    results.extend(check_instance_offered(clients.ec2, ecs))
    results.append(check_gpu_ami(clients.ssm, settings, ecs))
    results.extend(check_reservations(clients.ec2, clients.cloudformation, settings, ecs))
    if ecs.images_copied_at_deploy:
        results.append(
            skipped("ECR images", "copy_images = true: the deploy copies them from Cartesia's registry")
        )
    results.extend(check_images(clients.ecr, ecs))
    if ecs.secrets_created_at_deploy:
        results.append(
            skipped("secrets", "secrets.create = true: the stack creates them (replace the placeholders)")
        )
    results.extend(check_secrets(clients.secretsmanager, ecs))
    return results


def before_deploy(settings: Settings, secretsmanager: SecretsManagerClient) -> list[CheckResult]:
    """Every secret the stack imports: a task whose secret is missing fails to start, tens of minutes in."""
    ecs = ecs_targets(settings)
    if ecs is None:  # --before-deploy ecs for an environment without the route: nothing of it to check
        return []
    results = []
    if ecs.secrets_created_at_deploy:
        results.append(skipped("secrets", "secrets.create = true: the stack creates them"))
    if ecs.secret_names:
        results.extend(check_secrets(secretsmanager, ecs))
    return results


def after_deploy(clients: AwsClients, settings: Settings) -> list[CheckResult]:
    """None of this route's yet: what only a running ECS deployment shows is checked by hand."""
    return [
        skipped(
            "ECS checks after a deploy",
            'none yet: docs/operate.md, "After the first deploy: smoke checks", lists them, by hand',
        )
    ]
