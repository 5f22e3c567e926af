"""The EKS route's mirror checks (sonic_deploy/routes/eks/preflight_mirror.py) against botocore's Stubber in
ECR's own request and response shapes (DescribeImages): dev-eks with [eks.mirror] in the deploying account,
each chart by its version's tag, each image by its tag or, where the chart pins one, its digest."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sonic_deploy.config import Settings, load_settings
from sonic_deploy.preflight.results import CheckResult
from sonic_deploy.routes.eks.charts import CHARTS, KARPENTER, Image
from sonic_deploy.routes.eks.preflight import checks
from sonic_deploy.routes.eks.preflight_mirror import check_mirror
from tests.cdk_context import ROOT
from tests.conftest import EditConfig
from tests.preflight.deployed_aws import ACCOUNT, REGION, WHEN, Aws, stubbed
from tests.preflight.test_preflight_eks import TODAY, offered, quota, running, secrets, versions

HOST = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com"
SHIPPED = (
    '# [eks.mirror]\n# charts = "123456789012.dkr.ecr.us-east-2.amazonaws.com/sonic-mirror/charts"\n'
    '# images = "123456789012.dkr.ecr.us-east-2.amazonaws.com/sonic-mirror"'
)
FIX = "copy it: `sonic-deploy mirror --env dev-eks` prints the commands"
IMAGES = [image for pin in CHARTS for image in pin.images]
CHART_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.fixture
def aws() -> Iterator[Aws]:
    with stubbed(("sts", "ec2", "service_quotas", "eks", "secretsmanager", "ecr")) as answered:
        yield answered


@pytest.fixture
def mirrored(edit_config: EditConfig) -> Settings:
    return load_settings(
        edit_config("environments/dev-eks.toml", SHIPPED, SHIPPED.replace("# ", "")), "dev-eks"
    )


def _request(repository: str, wanted: dict[str, str]) -> dict[str, Any]:
    return {"registryId": ACCOUNT, "repositoryName": repository, "imageIds": [wanted]}


def _found(repository: str, wanted: dict[str, str], status: str = "ACTIVE", **more: Any) -> dict[str, Any]:
    """DescribeImages' answer for one image: its digest and tags, size, push time and media types."""
    detail = {
        "registryId": ACCOUNT,
        "repositoryName": repository,
        "imageDigest": wanted.get("imageDigest", DIGEST),
        "imageTags": [wanted["imageTag"]] if "imageTag" in wanted else ["1.14.1"],
        "imageSizeInBytes": 23_456_789,
        "imagePushedAt": WHEN,
        "imageManifestMediaType": CHART_MANIFEST,
        "imageStatus": status,
        **more,
    }
    return {"imageDetails": [detail]}


def _chart(pin_chart: str, version: str) -> tuple[str, dict[str, str]]:
    return f"sonic-mirror/charts/{pin_chart}", {"imageTag": version}


def _image(image: Image) -> tuple[str, dict[str, str]]:
    wanted = {"imageDigest": image.digest} if image.digest else {"imageTag": image.tag}
    return f"sonic-mirror/{image.registry}/{image.path}", wanted


def everything(aws: Aws, missing: dict[str, str] | None = None, archived: str | None = None) -> None:
    """Every DescribeImages the checks make, in order; `missing`: repository -> error code; `archived`: the
    one repository whose image is ARCHIVED."""
    asked = [_chart(pin.chart, pin.version) for pin in CHARTS] + [_image(image) for image in IMAGES]
    for repository, wanted in asked:
        code = (missing or {}).get(repository)
        if code is not None:
            aws.stubs["ecr"].add_client_error(
                "describe_images",
                service_error_code=code,
                service_message=f"The repository with name '{repository}' does not exist in the registry "
                f"with id '{ACCOUNT}'"
                if code == "RepositoryNotFoundException"
                else f"The image with imageId {wanted} does not exist within the repository",
                http_status_code=400,
                expected_params=_request(repository, wanted),
            )
            continue
        extra: dict[str, Any] = {}
        if repository.startswith("sonic-mirror/charts/"):
            extra["artifactMediaType"] = "application/vnd.cncf.helm.config.v1+json"
        else:
            extra["imageManifestMediaType"] = INDEX
        status = "ARCHIVED" if repository == archived else "ACTIVE"
        aws.answer(
            "ecr",
            "describe_images",
            _found(repository, wanted, status, **extra),
            _request(repository, wanted),
        )


def _rows(results: list[CheckResult]) -> list[tuple[str, str]]:
    return [(r.check, r.status) for r in results]


def test_everything_in_the_mirror_passes(aws: Aws, mirrored: Settings) -> None:
    everything(aws)
    results = check_mirror(aws.clients.ecr, mirrored, ACCOUNT)
    assert _rows(results) == [
        ("mirror account", "pass"),
        *((f"mirror chart {pin.chart} {pin.version}", "pass") for pin in CHARTS),
        *((f"mirror image {image.reference}", "pass") for image in IMAGES),
    ]
    assert results[2].detail == f"in sonic-mirror/charts/karpenter ({DIGEST[:19]})"
    # Karpenter's controller is asked for by its digest, the one its chart names.
    (controller,) = KARPENTER.images
    assert controller.digest is not None
    assert results[9].check == f"mirror image {controller.reference}"
    assert (
        results[9].detail == f"in sonic-mirror/public.ecr.aws/karpenter/controller ({controller.digest[:19]})"
    )


def test_each_missing_chart_and_image_is_reported_with_the_fix(aws: Aws, mirrored: Settings) -> None:
    everything(
        aws,
        missing={
            "sonic-mirror/charts/keda": "RepositoryNotFoundException",
            "sonic-mirror/public.ecr.aws/karpenter/controller": "ImageNotFoundException",
            "sonic-mirror/registry.k8s.io/csi-secrets-store/driver-crds": "ImageNotFoundException",
        },
    )
    failed = [r for r in check_mirror(aws.clients.ecr, mirrored, ACCOUNT) if r.status == "fail"]
    assert [(r.check, r.detail, r.fix) for r in failed] == [
        ("mirror chart keda 2.20.2", "no ECR repository sonic-mirror/charts/keda", FIX),
        (
            f"mirror image {KARPENTER.images[0].reference}",
            f"sonic-mirror/public.ecr.aws/karpenter/controller has no {KARPENTER.images[0].digest}",
            FIX,
        ),
        (
            "mirror image registry.k8s.io/csi-secrets-store/driver-crds:v1.6.0",
            "sonic-mirror/registry.k8s.io/csi-secrets-store/driver-crds has no v1.6.0",
            FIX,
        ),
    ]


def test_an_archived_image_cannot_be_pulled(aws: Aws, mirrored: Settings) -> None:
    everything(aws, archived="sonic-mirror/nvcr.io/nvidia/k8s-device-plugin")
    (failed,) = [r for r in check_mirror(aws.clients.ecr, mirrored, ACCOUNT) if r.status == "fail"]
    assert failed.detail == (
        "sonic-mirror/nvcr.io/nvidia/k8s-device-plugin:v0.20.0 is ARCHIVED: a pull fails until it is restored"
    )
    assert failed.fix.startswith(
        "aws ecr update-image-storage-class --region us-east-2 --repository-name "
        "sonic-mirror/nvcr.io/nvidia/k8s-device-plugin --image-id imageTag=v0.20.0 --target-storage-class STANDARD"
    )


def test_a_mirror_in_another_account_fails_the_account_check(aws: Aws, mirrored: Settings) -> None:
    everything(aws)
    results = check_mirror(aws.clients.ecr, mirrored, "210987654321")
    assert (results[0].check, results[0].status) == ("mirror account", "fail")
    assert "names account 123456789012; these credentials are account 210987654321" in results[0].detail
    assert "eks.mirror in config/environments/dev-eks.toml" in results[0].fix


def test_access_denied_names_the_action(aws: Aws, mirrored: Settings) -> None:
    aws.stubs["ecr"].add_client_error(
        "describe_images",
        service_error_code="AccessDeniedException",
        service_message="User: arn:aws:iam::123456789012:user/ops is not authorized to perform: "
        "ecr:DescribeImages",
        http_status_code=400,
        expected_params=_request("sonic-mirror/charts/karpenter-crd", {"imageTag": "1.14.1"}),
    )
    for repository, wanted in [_chart(pin.chart, pin.version) for pin in CHARTS[1:]] + [
        _image(image) for image in IMAGES
    ]:
        aws.answer("ecr", "describe_images", _found(repository, wanted), _request(repository, wanted))
    result = check_mirror(aws.clients.ecr, mirrored, ACCOUNT)[1]
    assert (result.status, result.fix) == (
        "fail",
        "grant the credentials ecr:DescribeImages (read-only), or run preflight with a role that has it",
    )


def test_without_a_mirror_ecr_is_not_asked(aws: Aws) -> None:
    assert check_mirror(aws.clients.ecr, load_settings(ROOT / "config", "dev-eks"), ACCOUNT) == []


def test_the_route_checks_the_mirror_before_the_secrets(aws: Aws, mirrored: Settings) -> None:
    quota(aws)
    running(aws)
    offered(aws)
    versions(aws)
    everything(aws)
    secrets(aws)
    rows = _rows(checks(aws.clients, mirrored, ACCOUNT, today=TODAY))
    assert rows[3:5] == [("Kubernetes 1.36 support", "pass"), ("mirror account", "pass")]
    assert rows[-3] == (f"mirror image {IMAGES[-1].reference}", "pass")
    assert [check for check, _ in rows[-2:]] == [
        "secret sonic/dev-eks/cartesia-api-key",
        "secret sonic/dev-eks/cartesia-registry",
    ]
