"""`sonic-deploy preflight`: will the deployment work in this account today? Real AWS calls, no aws_cdk."""

from sonic_deploy.preflight.results import CheckResult, Status
from sonic_deploy.preflight.runner import AwsClients, run_preflight

__all__ = ["AwsClients", "CheckResult", "Status", "run_preflight"]
