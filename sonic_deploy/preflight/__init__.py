"""`sonic-deploy preflight`: will the deployment work in this account today? Real AWS calls, no aws_cdk."""

from sonic_deploy.preflight.results import CheckResult, Status
from sonic_deploy.preflight.runner import AwsClients, run_preflight
from sonic_deploy.preflight.targets import EcsTargets

__all__ = ["AwsClients", "CheckResult", "EcsTargets", "Status", "run_preflight"]
