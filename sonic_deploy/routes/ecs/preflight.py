"""Checks for the self-managed ECS route: G-instance vCPU quota, the types in their AZs, images and secrets."""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from sonic_deploy.config import Settings
from sonic_deploy.preflight.gpu_quota import G_AND_VT_CHECK, GpuGroup, check_g_and_vt_quota
from sonic_deploy.preflight.offerings import Placement, check_types_offered
from sonic_deploy.preflight.quotas import BLUE_GREEN_FACTOR
from sonic_deploy.preflight.results import CheckResult, aws_error, error_code, failed, passed, skipped
from sonic_deploy.preflight.secrets import check_named_secrets
from sonic_deploy.routes.ecs.preflight_capacity import check_gpu_ami, check_reservations
from sonic_deploy.routes.ecs.preflight_deployed import after_deploy as after_deploy  # `--after-deploy ecs`
from sonic_deploy.routes.ecs.preflight_targets import EcsTargets, ecs_targets

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ecr import ECRClient
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_service_quotas import ServiceQuotasClient

    from sonic_deploy.preflight.runner import AwsClients


def check_gpu_vcpu_quota(
    quotas: ServiceQuotasClient, ec2: EC2Client, settings: Settings, ecs: EcsTargets
) -> CheckResult:
    """Sized for the largest type each group may launch (sonic_deploy/preflight/gpu_quota.py), each at twice its
    maximum for a rolling deploy. With a fallback AZ both groups can run at once, so both count at their most."""
    if ecs.market == "spot":
        # Spot instances count against the Spot quota, not this one (Service Quotas, EC2: "All G and VT Spot
        # Instance Requests"; its code is not checked here: UNVERIFIED).
        return skipped(
            G_AND_VT_CHECK,
            'market = "spot": the On-Demand quota does not apply; check "All G and VT Spot Instance Requests" '
            "in the Service Quotas console (not checked here)",
        )
    blue_green = f"x {BLUE_GREEN_FACTOR} (blue/green)"
    groups = [
        GpuGroup(
            f"max_instances {ecs.max_instances} {blue_green}",
            ecs.max_instances * BLUE_GREEN_FACTOR,
            ecs.instance_types,
        )
    ]
    if ecs.fallback_zone is not None:
        groups.append(
            GpuGroup(
                f"fallback ({ecs.fallback_zone}) max_instances {ecs.fallback_max_instances} {blue_green}",
                ecs.fallback_max_instances * BLUE_GREEN_FACTOR,
                ecs.fallback_instance_types,
            )
        )
    return check_g_and_vt_quota(quotas, ec2, settings, settings.stack_name("ecs"), groups)


def check_instance_offered(ec2: EC2Client, ecs: EcsTargets) -> list[CheckResult]:
    """Each GPU type in the AZ whose group launches it: the first AZ's types and the fallback AZ's."""
    placements = [
        Placement(
            ecs.availability_zone,
            ecs.instance_types,
            "the ECS availability zone",
            "ecs.instance_type / ecs.capacity.instance_types",
        )
    ]
    if ecs.fallback_zone is not None:
        placements.append(
            Placement(
                ecs.fallback_zone,
                ecs.fallback_instance_types,
                "ecs.capacity.fallback.availability_zone",
                "ecs.capacity.fallback.instance_types",
            )
        )
    return check_types_offered(ec2, placements)


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
    return check_named_secrets(secrets, ecs.secret_names)


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
