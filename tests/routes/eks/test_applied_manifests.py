"""The Kubernetes objects the EKS stack applies, read back out of its templates (both ways in, and air-gapped),
validate against Kubernetes' schemas at the configured version and the custom resources' (docs/eks.md, section
5). The template's tokens become values of the kind AWS would put there."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Template

from tests.conftest import resources_of
from tests.routes.eks.kube_schemas import validate

ACCOUNT, REGION = "123456789012", "us-east-2"
# What a Ref or a GetAtt of each type resolves to when the stack is deployed: a value of the right form.
REF = {
    "AWS::IAM::Role": "sonic-dev-eks-KarpenterNodeRole-0123",
    "AWS::IAM::InstanceProfile": "sonic-dev-eks-eks-KarpenterNodeInstanceProfile-0123",
    "AWS::EC2::Subnet": "subnet-0123456789abcdef0",
    "AWS::ECR::Repository": "sonic-dev-eks/eks/gpu-worker",
    "AWS::Logs::LogGroup": "sonic-dev-eks-MetricsLogs-0123",
    "AWS::ElasticLoadBalancingV2::TargetGroup": (
        f"arn:aws:elasticloadbalancing:{REGION}:{ACCOUNT}:targetgroup/sonic-api/0123456789abcdef"
    ),
    "AWS::URLSuffix": "amazonaws.com",
}
GET_ATT = {
    "ClusterSecurityGroupId": "sg-0123456789abcdef0",
    "GroupName": "sonic-dev-eks-Placement-0123",
    "Arn": f"arn:aws:ecr:{REGION}:{ACCOUNT}:repository/sonic-dev-eks/eks/gpu-worker",
}


def _resolve(value: Any, types: dict[str, str]) -> str:
    if isinstance(value, str):
        return value
    ((function, argument),) = value.items()
    if function == "Ref":
        return REF[types.get(argument, argument)]
    if function == "Fn::GetAtt":
        return GET_ATT[argument[1]]
    if function == "Fn::Select":
        index, (split,) = argument[0], argument[1].values()
        return str(_resolve(split[1], types).split(split[0])[index])
    if function == "Fn::Join":
        return str(argument[0]).join(_resolve(part, types) for part in argument[1])
    raise AssertionError(f"no value for {function}")


def applied(template: Template) -> list[dict[str, Any]]:
    """Every object of every KubernetesManifest in the template, tokens resolved."""
    resources = template.to_json()["Resources"]
    types = {logical: resource["Type"] for logical, resource in resources.items()}
    objects: list[dict[str, Any]] = []
    for manifest in resources_of(template, "Custom::AWSCDK-EKS-KubernetesResource").values():
        objects.extend(json.loads(_resolve(manifest["Properties"]["Manifest"], types)))
    return objects


@pytest.mark.parametrize("way_in", ["eks_template", "eks_existing", "eks_air_gapped"])
def test_every_object_the_stack_applies_validates(way_in: str, request: pytest.FixtureRequest) -> None:
    objects = applied(request.getfixturevalue(way_in))
    kinds = {o["kind"] for o in objects}
    assert {"Namespace", "Deployment", "StatefulSet", "NodePool", "EC2NodeClass", "ScaledObject"} <= kinds
    assert "TargetGroupBinding" in kinds and "SecretProviderClass" in kinds
    for manifest in objects:
        validate(manifest)
