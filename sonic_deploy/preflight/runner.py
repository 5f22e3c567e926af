"""Run every preflight check for one environment, in the order a newcomer would fix them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sonic_deploy.config import Settings
from sonic_deploy.preflight.account_checks import check_bootstrap, check_client_rules_quota, check_identity
from sonic_deploy.preflight.capacity_checks import check_gpu_ami, check_reservations
from sonic_deploy.preflight.ecs_checks import (
    check_gpu_vcpu_quota,
    check_images,
    check_instance_offered,
    check_secrets,
)
from sonic_deploy.preflight.results import CheckResult, skipped
from sonic_deploy.preflight.sagemaker_checks import (
    check_endpoint_log_group,
    check_endpoint_quota,
    check_model_package,
    check_zones_offer_hardware,
)
from sonic_deploy.preflight.targets import EcsTargets, ecs_targets

if TYPE_CHECKING:
    from boto3 import Session
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ecr import ECRClient
    from mypy_boto3_logs import CloudWatchLogsClient
    from mypy_boto3_sagemaker import SageMakerClient
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_service_quotas import ServiceQuotasClient
    from mypy_boto3_ssm import SSMClient
    from mypy_boto3_sts import STSClient


@dataclass(frozen=True)
class AwsClients:
    """The clients preflight calls, all in the environment's Region (tests pass moto or stubbed ones)."""

    sts: STSClient
    sagemaker: SageMakerClient
    service_quotas: ServiceQuotasClient
    ec2: EC2Client
    cloudformation: CloudFormationClient
    ecr: ECRClient
    secretsmanager: SecretsManagerClient
    logs: CloudWatchLogsClient
    ssm: SSMClient

    @classmethod
    def from_session(cls, session: Session, region: str) -> AwsClients:
        return cls(
            sts=session.client("sts", region_name=region),
            sagemaker=session.client("sagemaker", region_name=region),
            service_quotas=session.client("service-quotas", region_name=region),
            ec2=session.client("ec2", region_name=region),
            cloudformation=session.client("cloudformation", region_name=region),
            ecr=session.client("ecr", region_name=region),
            secretsmanager=session.client("secretsmanager", region_name=region),
            logs=session.client("logs", region_name=region),
            ssm=session.client("ssm", region_name=region),
        )


def run_preflight(
    clients: AwsClients, settings: Settings, ecs: EcsTargets | None = None
) -> list[CheckResult]:
    identity, account = check_identity(clients.sts, settings)
    results = [identity]
    if account is None:
        return [*results, skipped("all other checks", "they need working credentials for the right account")]
    region = settings.environment.region
    routes = settings.environment.routes

    if "sagemaker" in routes:
        results.append(check_model_package(clients.sagemaker, settings, account))
        results.append(check_endpoint_quota(clients.service_quotas, clients.sagemaker, settings))
        results.append(check_zones_offer_hardware(clients.ec2, settings))
        results.append(check_endpoint_log_group(clients.logs, clients.cloudformation, settings))
    else:
        results.append(skipped("SageMaker checks", f"route not in {settings.environment_name}'s routes"))

    ecs = ecs if ecs is not None else ecs_targets(settings)
    if ecs is not None:
        results.append(check_gpu_vcpu_quota(clients.service_quotas, clients.ec2, settings, ecs))
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
    else:
        results.append(skipped("ECS checks", f"route not in {settings.environment_name}'s routes"))

    results.append(check_bootstrap(clients.cloudformation, account, region))
    results.append(check_client_rules_quota(clients.service_quotas, settings))
    return results
