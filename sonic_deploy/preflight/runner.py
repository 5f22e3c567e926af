"""Run every preflight check for one environment, in the order a newcomer would fix them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sonic_deploy.config import Settings
from sonic_deploy.preflight.account_checks import check_bootstrap, check_client_rules_quota, check_identity
from sonic_deploy.preflight.results import CheckResult, skipped
from sonic_deploy.routes import ROUTES

if TYPE_CHECKING:
    from boto3 import Session
    from mypy_boto3_cloudformation import CloudFormationClient
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_ecr import ECRClient
    from mypy_boto3_ecs import ECSClient
    from mypy_boto3_eks import EKSClient
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
    cloudwatch: CloudWatchClient  # `--after-deploy`'s metrics and alarms
    eks: EKSClient  # the EKS route's cluster, versions and add-ons
    ecs: ECSClient  # `--after-deploy`: the ECS route's services

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
            cloudwatch=session.client("cloudwatch", region_name=region),
            eks=session.client("eks", region_name=region),
            ecs=session.client("ecs", region_name=region),
        )


def run_preflight(clients: AwsClients, settings: Settings) -> list[CheckResult]:
    identity, account = check_identity(clients.sts, settings)
    results = [identity]
    if account is None:
        return [*results, skipped("all other checks", "they need working credentials for the right account")]
    deployed = settings.environment.routes
    for name, route in ROUTES.items():
        if name in deployed:
            results.extend(route.preflight_module().checks(clients, settings, account))
        else:
            results.append(
                skipped(f"{route.title} checks", f"route not in {settings.environment_name}'s routes")
            )
    results.append(check_bootstrap(clients.cloudformation, account, settings.environment.region))
    results.append(check_client_rules_quota(clients.service_quotas, settings))
    return results
