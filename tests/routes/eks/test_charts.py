"""The charts the EKS route installs and where they come from (sonic_deploy/routes/eks/charts.py): without a
mirror each chart's own repository and values; with one, the chart from oci://<charts>/<name> and every image
each chart deploys pointed under <images>/<registry>/<path>, same tag and digest, as the charts' templates
would render them."""

from __future__ import annotations

from typing import Any

import pytest

from sonic_deploy.routes.eks.charts import (
    CHARTS,
    DCGM_EXPORTER,
    DEVICE_PLUGIN,
    KARPENTER,
    KARPENTER_CRD,
    KARPENTER_VERSION,
    KEDA,
    LOAD_BALANCER_CONTROLLER,
    SECRETS_PROVIDER_AWS,
    SECRETS_STORE_CSI_DRIVER,
    ChartPin,
    Image,
    chart_source,
    merged,
    registry_account,
    registry_host,
    registry_region,
    repository_name,
)
from sonic_deploy.routes.eks.config import EksMirrorConfig

HOST = "123456789012.dkr.ecr.us-east-2.amazonaws.com"
MIRROR = EksMirrorConfig(charts=f"{HOST}/sonic-mirror/charts", images=f"{HOST}/sonic-mirror")
UPSTREAM = ("public.ecr.aws", "ghcr.io", "nvcr.io", "registry.k8s.io")


def _at(values: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    for key in path:
        values = values[key]
    return values


def rendered_image(image: Image, values: dict[str, Any]) -> str:
    """The image reference the chart's template makes of its values (charts.py cites each template): KEDA joins
    registry and repository; Karpenter adds @digest; the others print repository:tag."""
    named = _at(values, image.values)
    repository = f"{named['registry']}/{named['repository']}" if image.split_registry else named["repository"]
    digest = named.get("digest")
    return f"{repository}:{named['tag']}" + (f"@{digest}" if digest else "")


def test_every_chart_once_in_install_order() -> None:
    assert [pin.chart for pin in CHARTS] == [
        "karpenter-crd",
        "karpenter",
        "aws-load-balancer-controller",
        "keda",
        "nvidia-device-plugin",
        "dcgm-exporter",
        "secrets-store-csi-driver",
        "secrets-store-csi-driver-provider-aws",
    ]
    images = [image for pin in CHARTS for image in pin.images]
    assert len(images) == len(set(images)) == 12


@pytest.mark.parametrize("pin", CHARTS, ids=lambda pin: pin.chart)
def test_without_a_mirror_nothing_changes(pin: ChartPin) -> None:
    source = chart_source(pin, None)
    assert (source.repository, source.values) == (pin.repository, {})


@pytest.mark.parametrize("pin", CHARTS, ids=lambda pin: pin.chart)
def test_with_a_mirror_the_chart_comes_from_oci_under_charts(pin: ChartPin) -> None:
    source = chart_source(pin, MIRROR)
    # The kubectl handler pulls `repository` with --version and untars it under its last path segment.
    assert source.repository == f"oci://{HOST}/sonic-mirror/charts/{pin.chart}"
    assert repository_name(source.repository) == f"sonic-mirror/charts/{pin.chart}"


@pytest.mark.parametrize(
    "image", [image for pin in CHARTS for image in pin.images], ids=lambda image: image.reference
)
def test_every_image_moves_under_the_mirror_with_its_tag_and_digest(image: Image) -> None:
    (pin,) = [pin for pin in CHARTS if image in pin.images]
    values = dict(chart_source(pin, MIRROR).values)
    # The layout contract: <images>/ followed by the upstream reference whole (registry, path, tag, digest).
    assert rendered_image(image, values) == f"{HOST}/sonic-mirror/{image.reference}"


def test_every_repository_value_points_into_the_mirror() -> None:
    def strings(values: Any, key: str = "") -> list[tuple[str, str]]:
        if isinstance(values, dict):
            return [found for k, v in values.items() for found in strings(v, k)]
        return [(key, values)] if isinstance(values, str) else []

    for pin in CHARTS:
        for key, value in strings(dict(chart_source(pin, MIRROR).values)):
            if key in ("repository", "registry") and not (key == "repository" and pin is KEDA):
                assert value.startswith(f"{HOST}/sonic-mirror/"), (pin.chart, key, value)
            assert not value.startswith(UPSTREAM), (pin.chart, key, value)


def test_karpenters_controller_keeps_the_release_digest() -> None:
    (image,) = KARPENTER.images
    named = chart_source(KARPENTER, MIRROR).values["controller"]["image"]
    assert named == {
        "repository": f"{HOST}/sonic-mirror/public.ecr.aws/karpenter/controller",
        "tag": "1.14.1",
        "digest": "sha256:445baefaaa689029cc12ac1f659b916b0b82fb14308ce536f8521fcf079116fa",
    }
    assert image.digest == named["digest"]
    assert KARPENTER_CRD.images == ()  # CRDs only


def test_keda_keeps_its_repositories_and_moves_each_registry() -> None:
    values = chart_source(KEDA, MIRROR).values["image"]
    assert {key: (v["registry"], v["repository"], v["tag"]) for key, v in values.items()} == {
        "keda": (f"{HOST}/sonic-mirror/ghcr.io", "kedacore/keda", "2.20.2"),
        "metricsApiServer": (f"{HOST}/sonic-mirror/ghcr.io", "kedacore/keda-metrics-apiserver", "2.20.2"),
        "webhooks": (f"{HOST}/sonic-mirror/ghcr.io", "kedacore/keda-admission-webhooks", "2.20.2"),
    }


def test_the_csi_drivers_hook_jobs_image_moves_too() -> None:
    linux = chart_source(SECRETS_STORE_CSI_DRIVER, MIRROR).values["linux"]
    assert set(linux) == {"image", "crds", "registrarImage", "livenessProbeImage"}
    assert linux["crds"] == {
        "image": {
            "repository": f"{HOST}/sonic-mirror/registry.k8s.io/csi-secrets-store/driver-crds",
            "tag": "v1.6.0",
        }
    }


@pytest.mark.parametrize(
    ("pin", "tag"),
    [
        (KARPENTER, KARPENTER_VERSION),
        (LOAD_BALANCER_CONTROLLER, "v3.5.0"),
        (KEDA, "2.20.2"),
        (DEVICE_PLUGIN, "v0.20.0"),
        (DCGM_EXPORTER, "4.5.3-4.8.2-distroless"),
        (SECRETS_STORE_CSI_DRIVER, "v1.6.0"),
        (SECRETS_PROVIDER_AWS, "3.1.1"),
    ],
    ids=lambda value: value.chart if isinstance(value, ChartPin) else value,
)
def test_a_version_bump_bumps_the_main_image_too(pin: ChartPin, tag: str) -> None:
    """Each chart's first image is tagged from its version (its appVersion): a pin moved without its images
    would deploy the new chart with the old image from the mirror."""
    assert pin.images[0].tag == tag
    assert pin.version.removeprefix("v") in tag


def test_merged_lays_mappings_over_mappings_and_replaces_the_rest() -> None:
    base = {"controller": {"resources": {"cpu": "1"}}, "replicas": 2, "tolerations": [{"key": "a"}]}
    over = {"controller": {"image": {"tag": "x"}}, "tolerations": [], "new": {"k": "v"}}
    assert merged(base, over) == {
        "controller": {"resources": {"cpu": "1"}, "image": {"tag": "x"}},
        "replicas": 2,
        "tolerations": [],
        "new": {"k": "v"},
    }
    assert base["controller"] == {"resources": {"cpu": "1"}}  # not changed in place


def test_an_ecr_path_gives_its_host_account_region_and_repository() -> None:
    reference = f"oci://{HOST}/sonic-mirror/charts/keda"
    assert registry_host(reference) == registry_host(MIRROR.images) == HOST
    assert registry_account(reference) == "123456789012"
    assert registry_region(MIRROR.charts) == "us-east-2"
    assert (
        repository_name(f"{HOST}/sonic-mirror/ghcr.io/kedacore/keda") == "sonic-mirror/ghcr.io/kedacore/keda"
    )
