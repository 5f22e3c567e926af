"""The EKS route's mirror checks (docs/eks.md, "The mirror"): with `[eks.mirror]`, each chart version and each
controller image the stack installs is in your ECR, where the releases will look for it (charts.py). A missing
one fails the deploy only once Helm gives up on its pods, ten minutes into it. Read-only: ecr:DescribeImages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from sonic_deploy.config import Settings
from sonic_deploy.preflight.results import CheckResult, aws_error, error_code, failed, passed
from sonic_deploy.routes.eks.charts import CHARTS, mirrored_chart, registry_account, repository_name
from sonic_deploy.routes.eks.config import EksMirrorConfig

if TYPE_CHECKING:
    from mypy_boto3_ecr import ECRClient
    from mypy_boto3_ecr.type_defs import ImageIdentifierTypeDef


def _fix(settings: Settings) -> str:
    return f"copy it: `sonic-deploy mirror --env {settings.environment_name}` prints the commands"


def check_mirror(ecr: ECRClient, settings: Settings, account: str) -> list[CheckResult]:
    """One result for the mirror's account, then one per chart and per image: present (active), or missing
    with the fix. None without `[eks.mirror]`."""
    eks = settings.environment.eks
    mirror = eks.mirror if eks is not None else None
    if mirror is None:
        return []
    results = [_check_account(mirror, settings, account)]
    for pin in CHARTS:
        reference = mirrored_chart(pin, mirror)
        results.append(
            _check_item(
                ecr, settings, f"mirror chart {pin.chart} {pin.version}", reference, {"imageTag": pin.version}
            )
        )
    images = dict.fromkeys(image for pin in CHARTS for image in pin.images)
    for image in images:
        # A pod pulls a digest-pinned image by its digest (the tag is only shown): that is what must be there.
        wanted: ImageIdentifierTypeDef = (
            {"imageDigest": image.digest} if image.digest else {"imageTag": image.tag}
        )
        reference = image.mirrored(mirror.images)
        results.append(_check_item(ecr, settings, f"mirror image {image.reference}", reference, wanted))
    return results


def _check_account(mirror: EksMirrorConfig, settings: Settings, account: str) -> CheckResult:
    """The route's ECR endpoints let through this account's repositories only (constructs/endpoint_policies.py)."""
    check = "mirror account"
    owners = sorted({registry_account(mirror.charts), registry_account(mirror.images)})
    if owners != [account]:
        return failed(
            check,
            f"[eks.mirror] names account {' and '.join(owners)}; these credentials are account {account}, and "
            "the cluster's ECR endpoints admit this account's repositories only",
            f"mirror into {account}'s ECR and name it in eks.mirror in config/environments/"
            f"{settings.environment_name}.toml, or run preflight with the deploying account's credentials",
        )
    return passed(check, f"{account}, the deploying account")


def _check_item(
    ecr: ECRClient, settings: Settings, check: str, reference: str, wanted: ImageIdentifierTypeDef
) -> CheckResult:
    repository = repository_name(reference)
    shown = next(iter(wanted.values()))
    try:
        found = ecr.describe_images(
            registryId=registry_account(reference),
            repositoryName=repository,
            imageIds=[wanted],
        )["imageDetails"]
    except ClientError as error:
        code = error_code(error)
        if code == "RepositoryNotFoundException":
            return failed(check, f"no ECR repository {repository}", _fix(settings))
        if code == "ImageNotFoundException":
            return failed(check, f"{repository} has no {shown}", _fix(settings))
        return aws_error(check, error, "ecr:DescribeImages")
    detail: Mapping[str, Any] = found[0] if found else {}
    status = str(detail.get("imageStatus") or "ACTIVE")
    if status != "ACTIVE":
        # An archived image is listed but cannot be pulled until restored (ecr:UpdateImageStorageClass).
        identifier = next(f"{key}={value}" for key, value in wanted.items())
        return failed(
            check,
            f"{repository}:{shown} is {status}: a pull fails until it is restored",
            f"aws ecr update-image-storage-class --region {settings.environment.region} --repository-name "
            f"{repository} --image-id {identifier} "
            "--target-storage-class STANDARD (or copy it again)",
        )
    return passed(check, f"in {repository} ({str(detail.get('imageDigest', '?'))[:19]})")
