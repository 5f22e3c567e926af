"""Checks for the self-managed ECS route: G-instance vCPU quota, the type in the AZ, images and secrets."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from sonic_deploy.config import Settings
from sonic_deploy.preflight.capacity_in_use import InUse, gpu_vcpus_in_use
from sonic_deploy.preflight.quotas import BLUE_GREEN_FACTOR, increase_command, quota_by_code
from sonic_deploy.preflight.results import CheckResult, aws_error, error_code, failed, passed
from sonic_deploy.preflight.targets import EcsTargets

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ecr import ECRClient
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_service_quotas import ServiceQuotasClient

G_AND_VT_QUOTA_CODE = "L-DB2E81BA"  # "Running On-Demand G and VT instances", in vCPUs


def check_gpu_vcpu_quota(
    quotas: ServiceQuotasClient, ec2: EC2Client, settings: Settings, ecs: EcsTargets
) -> CheckResult:
    check = "quota: Running On-Demand G and VT instances"
    region = settings.environment.region
    row = settings.catalogue.instance_types.get(ecs.instance_type)
    if row is None:
        return failed(
            check,
            f"{ecs.instance_type} is not in config/instance_types.toml, so its vCPUs are unknown",
            f"add a row for {ecs.instance_type} (gpus, gpu, vcpus, memory_gib)",
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
    needed = ecs.max_instances * BLUE_GREEN_FACTOR * row.vcpus + elsewhere.amount
    source = "applied" if quota.applied else "AWS default"
    detail = (
        f"{quota.value:g} vCPUs ({source}); needs {needed}: max_instances {ecs.max_instances} x "
        f"{BLUE_GREEN_FACTOR} (blue/green) x {row.vcpus} vCPUs of {ecs.instance_type}, + {used_text}"
    )
    if quota.value < needed:
        return failed(check, detail, f"request {needed}: {increase_command('ec2', quota, needed, region)}")
    return passed(check, detail)


def check_instance_offered(ec2: EC2Client, ecs: EcsTargets) -> CheckResult:
    check = f"{ecs.instance_type} offered in {ecs.availability_zone}"
    try:
        offered = ec2.describe_instance_type_offerings(
            LocationType="availability-zone",
            Filters=[{"Name": "instance-type", "Values": [ecs.instance_type]}],
        )["InstanceTypeOfferings"]
    except ClientError as error:
        return aws_error(check, error, "ec2:DescribeInstanceTypeOfferings")
    zones = sorted(str(offer.get("Location")) for offer in offered)
    if ecs.availability_zone in zones:
        return passed(
            check,
            f"offered (also in {', '.join(z for z in zones if z != ecs.availability_zone) or 'no other AZ'})",
        )
    if not zones:
        return failed(
            check,
            f"{ecs.instance_type} is not offered in any AZ of this Region",
            "choose another instance type or Region",
        )
    return failed(
        check,
        f"not offered in {ecs.availability_zone}; offered in {', '.join(zones)}",
        f"set the ECS availability zone to one of {', '.join(zones)}",
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
