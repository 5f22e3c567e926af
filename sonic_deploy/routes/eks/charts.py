"""The Helm charts the EKS route installs, each pinned with the upstream images it deploys with the route's
values, and where both come from: their public registries, or your ECR ([eks.mirror], docs/eks.md, "The
mirror"). No aws_cdk: the constructs, `sonic-deploy mirror` and preflight read the same list."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sonic_deploy.routes.eks.config import EksMirrorConfig

OCI = "oci://"


@dataclass(frozen=True)
class Image:
    """An upstream image `registry/path:tag[@digest]` and where the chart's values name it: `values`, the path
    to the mapping holding `repository` and `tag` (and `digest` where the chart pins one). `split_registry`:
    the chart takes the registry apart from the repository (KEDA's `registry`, joined with "/")."""

    registry: str
    path: str
    tag: str
    values: tuple[str, ...]
    digest: str | None = None
    split_registry: bool = False

    @property
    def reference(self) -> str:
        """The reference as the chart renders it upstream."""
        return f"{self.registry}/{self.path}:{self.tag}" + (f"@{self.digest}" if self.digest else "")

    def mirrored(self, images: str) -> str:
        """Its repository under a mirror's `images`: the upstream registry and path, kept whole."""
        return f"{images}/{self.registry}/{self.path}"

    def overrides(self, images: str) -> dict[str, Any]:
        """The values that point the chart at the mirror's copy, with the same tag and digest."""
        if self.split_registry:
            named: dict[str, Any] = {"registry": f"{images}/{self.registry}", "repository": self.path}
        else:
            named = {"repository": self.mirrored(images)}
        named["tag"] = self.tag
        if self.digest:
            named["digest"] = self.digest
        for key in reversed(self.values):
            named = {key: named}
        return named


@dataclass(frozen=True)
class ChartPin:
    """A chart, the repository it is fetched from at deploy (an https Helm repository, or the chart's own
    oci:// reference), its version, and the images it deploys with the route's values."""

    chart: str
    repository: str
    version: str
    images: tuple[Image, ...] = ()

    @property
    def oci(self) -> bool:
        return self.repository.startswith(OCI)


@dataclass(frozen=True)
class ChartSource:
    """Where a release fetches its chart (HelmChart's `repository`) and the values that point its images
    elsewhere (empty: the chart's own)."""

    repository: str
    values: Mapping[str, Any]


# Karpenter 1.14.1: the chart and image hack/release/common.sh published, recorded on branch release-v1.14.1
# by its release commit c88abbbad (values.yaml:125-131). Tag v1.14.1 (bde0065) still has the 1.13.0 charts, and
# main (1d92708) pairs tag 1.14.1 with 1.14.0's digest. The digest is a multi-arch index (ko): copy it whole.
KARPENTER_VERSION = "1.14.1"
KARPENTER_CRD = ChartPin("karpenter-crd", "oci://public.ecr.aws/karpenter/karpenter-crd", KARPENTER_VERSION)
KARPENTER = ChartPin(
    "karpenter",
    "oci://public.ecr.aws/karpenter/karpenter",
    KARPENTER_VERSION,
    (
        Image(
            "public.ecr.aws",
            "karpenter/controller",
            KARPENTER_VERSION,
            ("controller", "image"),
            digest="sha256:445baefaaa689029cc12ac1f659b916b0b82fb14308ce536f8521fcf079116fa",
        ),
    ),
)
# v3.5.0 (section 3): helm/aws-load-balancer-controller/Chart.yaml at kubernetes-sigs/aws-load-balancer-
# controller@225f445 (tag v3.5.0), published in aws/eks-charts@c7f9ea5 (gh-pages). Its one image: values.yaml:9-11,
# deployment.yaml:237 (repository:tag, no appVersion fallback).
LOAD_BALANCER_CONTROLLER = ChartPin(
    "aws-load-balancer-controller",
    "https://aws.github.io/eks-charts",
    "3.5.0",
    (Image("public.ecr.aws", "eks/aws-load-balancer-controller", "v3.5.0", ("image",)),),
)
# 2.20.2, the newest 2.20 (design section 4): keda/Chart.yaml at kedacore/charts tag v2.20.2 (cbb9bb8), the
# operator kedacore/keda@8b4f083 (v2.20.2). The published index (gh-pages) was not in the snapshot. Three images
# (values.yaml:22-43; {manager,metrics-server,webhooks}/deployment.yaml: registry/repository:tag|appVersion).
KEDA = ChartPin(
    "keda",
    "https://kedacore.github.io/charts",
    "2.20.2",
    tuple(
        Image("ghcr.io", f"kedacore/{name}", "2.20.2", ("image", key), split_registry=True)
        for key, name in (
            ("keda", "keda"),
            ("metricsApiServer", "keda-metrics-apiserver"),
            ("webhooks", "keda-admission-webhooks"),
        )
    ),
)
# 0.20.0, the newest: deployments/helm/nvidia-device-plugin/Chart.yaml at NVIDIA/k8s-device-plugin tag
# v0.20.0 (1b826ac); index.yaml on its gh-pages (bf58428) lists stable/nvidia-device-plugin-0.20.0.tgz. Every
# container runs one image (_helpers.tpl:83-86, "v" + appVersion); GFD and NFD stay off (values.yaml:110-111).
DEVICE_PLUGIN = ChartPin(
    "nvidia-device-plugin",
    "https://nvidia.github.io/k8s-device-plugin",
    "0.20.0",
    (Image("nvcr.io", "nvidia/k8s-device-plugin", "v0.20.0", ("image",)),),
)
# 4.8.2, the design's (section 4): deployment/Chart.yaml in NVIDIA/dcgm-exporter@d5e5f51 (image
# 4.5.3-4.8.2); helm-charts/index.yaml on its gh-pages (ecd340d) lists dcgm-exporter-4.8.2.tgz. The image:
# values.yaml:15-20 of that package, daemonset.yaml:116-117.
DCGM_EXPORTER = ChartPin(
    "dcgm-exporter",
    "https://nvidia.github.io/dcgm-exporter/helm-charts",
    "4.8.2",
    (Image("nvcr.io", "nvidia/k8s/dcgm-exporter", "4.5.3-4.8.2-distroless", ("image",)),),
)
# 1.6.0, the one ASCP 3.1.1's Chart.lock pins: kubernetes-sigs/secrets-store-csi-driver tag v1.6.0 (4960f96). Linux
# only: the driver, registrar, liveness probe and the CRD hook Jobs' image (crds-upgrade-hook.yaml,
# keep-crds-upgrade-hook.yaml), values.yaml:1-66 of the package.
SECRETS_STORE_CSI_DRIVER = ChartPin(
    "secrets-store-csi-driver",
    "https://kubernetes-sigs.github.io/secrets-store-csi-driver/charts",
    "1.6.0",
    (
        Image("registry.k8s.io", "csi-secrets-store/driver", "v1.6.0", ("linux", "image")),
        Image("registry.k8s.io", "csi-secrets-store/driver-crds", "v1.6.0", ("linux", "crds", "image")),
        Image(
            "registry.k8s.io", "sig-storage/csi-node-driver-registrar", "v2.16.0", ("linux", "registrarImage")
        ),
        Image("registry.k8s.io", "sig-storage/livenessprobe", "v2.18.0", ("linux", "livenessProbeImage")),
    ),
)
# 3.1.1, the newest: charts/secrets-store-csi-driver-provider-aws/Chart.yaml at aws/secrets-store-csi-driver-
# provider-aws tag 3.1.1 (5f47771); index.yaml on gh-pages (1986b33). Its bundled driver is off: ours above. Its
# image: values.yaml:1-4, daemonset.yaml:37.
SECRETS_PROVIDER_AWS = ChartPin(
    "secrets-store-csi-driver-provider-aws",
    "https://aws.github.io/secrets-store-csi-driver-provider-aws",
    "3.1.1",
    (
        Image(
            "public.ecr.aws",
            "aws-secrets-manager/secrets-store-csi-driver-provider-aws",
            "3.1.1",
            ("image",),
        ),
    ),
)

# Every chart the stack installs, in the order it installs them.
CHARTS = (
    KARPENTER_CRD,
    KARPENTER,
    LOAD_BALANCER_CONTROLLER,
    KEDA,
    DEVICE_PLUGIN,
    DCGM_EXPORTER,
    SECRETS_STORE_CSI_DRIVER,
    SECRETS_PROVIDER_AWS,
)


def mirrored_chart(pin: ChartPin, mirror: EksMirrorConfig) -> str:
    """The chart in the mirror, where `helm push <chart>.tgz oci://<charts>` puts it (helm's
    pkg/pusher/ocipusher.go: the registry path joined with the chart's name, tagged with its version)."""
    return f"{OCI}{mirror.charts}/{pin.chart}"


def chart_source(pin: ChartPin, mirror: EksMirrorConfig | None) -> ChartSource:
    """Without a mirror, the chart's repository and its own image values; with one, the chart from the mirror
    and every image it deploys pointed there, same tag and digest."""
    if mirror is None:
        return ChartSource(pin.repository, {})
    values: dict[str, Any] = {}
    for image in pin.images:
        values = merged(values, image.overrides(mirror.images))
    return ChartSource(mirrored_chart(pin, mirror), values)


def merged(values: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """`values` with `overrides` laid over it, mapping by mapping (as Helm merges a values file over the
    chart's); anything else in `overrides` replaces what was there."""
    result = dict(values)
    for key, value in overrides.items():
        under = result.get(key)
        if isinstance(value, Mapping) and isinstance(under, Mapping):
            result[key] = merged(under, value)
        else:
            result[key] = value
    return result


def registry_host(path: str) -> str:
    """The registry of an ECR path (<account>.dkr.ecr.<region>.amazonaws.com[/prefix]), oci:// or not."""
    return path.removeprefix(OCI).split("/", 1)[0]


def repository_name(reference: str) -> str:
    """The ECR repository of a mirror reference (oci:// or not, without tag): the path after the host."""
    return reference.removeprefix(OCI).split("/", 1)[1]


def registry_account(path: str) -> str:
    return registry_host(path).split(".", 1)[0]


def registry_region(path: str) -> str:
    return registry_host(path).split(".")[3]
