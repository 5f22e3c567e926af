"""The secrets a self-hosted route's stack imports exist (secretsmanager:DescribeSecret): a pod or task whose
secret is missing fails to start, tens of minutes into a deploy."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from sonic_deploy.preflight.results import CheckResult, aws_error, error_code, failed, passed

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager import SecretsManagerClient


def check_named_secrets(secrets: SecretsManagerClient, names: Iterable[str]) -> list[CheckResult]:
    """One result per name: it exists and is not scheduled for deletion."""
    results = []
    for name in names:
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
