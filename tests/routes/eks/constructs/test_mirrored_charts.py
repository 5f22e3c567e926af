"""ClusterAddOns and KarpenterController with a mirror, on one bare stack synthesized once: every release
fetches its chart from oci://<charts>/<name> at its pinned version, and every image it deploys renders under
<images>/<registry>/<path> with its tag and digest; the releases' own values are kept beside them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Template
from aws_cdk.lambda_layer_kubectl_v36 import KubectlV36Layer

from sonic_deploy.constructs.encryption import EncryptionKey
from sonic_deploy.routes.eks.charts import CHARTS, KARPENTER, KEDA, ChartPin
from sonic_deploy.routes.eks.config import EksMirrorConfig
from sonic_deploy.routes.eks.constructs.add_ons import ClusterAddOns
from sonic_deploy.routes.eks.constructs.karpenter import KarpenterController
from tests.cdk_context import cli_context
from tests.conftest import rendered, resources_of
from tests.routes.eks.test_charts import rendered_image

CLUSTER, HOST = "sonic-test", "111111111111.dkr.ecr.us-east-2.amazonaws.com"
MIRROR = EksMirrorConfig(charts=f"{HOST}/mirror/charts", images=f"{HOST}/mirror")
SYSTEM = {"sonic.cartesia.ai/pool": "system"}


def _cluster(stack: Stack) -> eks.ICluster:
    bare = eks.Cluster.from_cluster_attributes(stack, "Bare", cluster_name=CLUSTER)
    provider = eks.KubectlProvider(
        stack, "Kubectl", cluster=bare, kubectl_layer=KubectlV36Layer(stack, "KubectlLayer")
    )
    return eks.Cluster.from_cluster_attributes(
        stack, "Cluster", cluster_name=CLUSTER, kubectl_provider=provider
    )


@pytest.fixture(scope="module")
def charts() -> dict[str, dict[str, Any]]:
    """The HelmChart resources' properties, by release."""
    stack = Stack(
        App(context=cli_context()), "Test", env=Environment(account="111111111111", region="us-east-2")
    )
    cluster = _cluster(stack)
    ClusterAddOns(
        stack,
        "AddOns",
        cluster=cluster,
        vpc_id="vpc-0123456789abcdef0",
        system_node_selector=SYSTEM,
        mirror=MIRROR,
    )
    KarpenterController(
        stack,
        "Karpenter",
        cluster=cluster,
        cluster_name=CLUSTER,
        key=EncryptionKey(stack, "Key", alias="alias/sonic-test").key,
        system_node_selector=SYSTEM,
        vpc_cni_uses_node_role=True,
        mirror=MIRROR,
    )
    template = Template.from_stack(stack)
    found = resources_of(template, "Custom::AWSCDK-EKS-HelmChart").values()
    return {chart["Properties"]["Release"]: chart["Properties"] for chart in found}


def _values(properties: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = json.loads(rendered(properties.get("Values", "{}")))
    return values


def test_every_release_pulls_its_pinned_chart_from_the_mirror(charts: dict[str, dict[str, Any]]) -> None:
    assert set(charts) == {pin.chart for pin in CHARTS}
    for pin in CHARTS:
        properties = charts[pin.chart]
        assert properties["Repository"] == f"oci://{HOST}/mirror/charts/{pin.chart}"
        assert (properties["Chart"], properties["Version"]) == (pin.chart, pin.version)


@pytest.mark.parametrize("pin", [pin for pin in CHARTS if pin.images], ids=lambda pin: pin.chart)
def test_every_image_renders_from_the_mirror(charts: dict[str, dict[str, Any]], pin: ChartPin) -> None:
    values = _values(charts[pin.chart])
    for image in pin.images:
        assert rendered_image(image, values) == f"{HOST}/mirror/{image.reference}"


def test_the_releases_own_values_stay(charts: dict[str, dict[str, Any]]) -> None:
    karpenter = _values(charts[KARPENTER.chart])
    assert karpenter["controller"]["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}
    assert karpenter["controller"]["image"]["digest"] == KARPENTER.images[0].digest
    assert karpenter["settings"]["clusterName"] == CLUSTER
    keda = _values(charts[KEDA.chart])
    assert keda["nodeSelector"] == SYSTEM and keda["serviceAccount"]["operator"]["name"] == "keda-operator"


def test_a_mirror_holds_one_karpenter_version() -> None:
    stack = Stack()
    with pytest.raises(ValueError, match=r"holds Karpenter 1\.14\.1's image, not 1\.13\.0's"):
        KarpenterController(
            stack,
            "Older",
            cluster=eks.Cluster.from_cluster_attributes(stack, "Cluster", cluster_name=CLUSTER),
            cluster_name=CLUSTER,
            key=EncryptionKey(stack, "Key", alias="alias/sonic-test").key,
            system_node_selector=SYSTEM,
            vpc_cni_uses_node_role=True,
            chart_version="1.13.0",
            mirror=MIRROR,
        )
