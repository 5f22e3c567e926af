"""The EKS route air-gapped (docs/eks.md, section 12, "Air-gapped: the network and Karpenter"), on one synth
of dev-eks with the compliance gate's switches (tests/conftest.py's eks_air_gapped), beside the connected
dev-eks: no way out, the endpoints its callers need and what their policies let through, Karpenter isolated
with the stack's instance profile."""

from __future__ import annotations

import fnmatch
import json
from typing import Any

from aws_cdk.assertions import Template

from sonic_deploy.routes.eks.endpoints import AIR_GAPPED, CONNECTED
from tests.conftest import rendered, resources_of
from tests.routes.eks.test_applied_manifests import REF, applied

# An IAM action's service -> the interface endpoints its calls go through, where the endpoint takes a policy.
ENDPOINTS_OF = {
    "ecr": ("ecr.api", "ecr.dkr"),
    "cloudwatch": ("monitoring",),
    "logs": ("logs",),
    "secretsmanager": ("secretsmanager",),
    "ec2": ("ec2",),
    "ssm": ("ssm",),
    "sqs": ("sqs",),
    "lambda": ("lambda",),
    "elasticloadbalancing": ("elasticloadbalancing",),
}


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _interface_endpoints(template: Template) -> dict[str, dict[str, Any]]:
    """Interface endpoints by service short name (com.amazonaws.us-east-2.<name>)."""
    return {
        endpoint["Properties"]["ServiceName"].split(".", 3)[3]: endpoint["Properties"]
        for endpoint in resources_of(template, "AWS::EC2::VPCEndpoint").values()
        if endpoint["Properties"].get("VpcEndpointType") == "Interface"
    }


def _gateway_statements(template: Template) -> dict[str, dict[str, Any]]:
    ((_, gateway),) = [
        (i, e)
        for i, e in resources_of(template, "AWS::EC2::VPCEndpoint").items()
        if e["Properties"].get("VpcEndpointType") == "Gateway"
    ]
    return {s["Sid"]: s for s in gateway["Properties"]["PolicyDocument"]["Statement"]}


def _statements(endpoint: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["Sid"]: s for s in endpoint["PolicyDocument"]["Statement"]}


def test_no_way_out_no_nat_gateway_no_internet_gateway_no_public_subnet(eks_air_gapped: Template) -> None:
    for kind in ("AWS::EC2::NatGateway", "AWS::EC2::InternetGateway", "AWS::EC2::EIP"):
        assert not resources_of(eks_air_gapped, kind), kind
    assert not any("Public" in logical_id for logical_id in resources_of(eks_air_gapped, "AWS::EC2::Subnet"))
    routes = resources_of(eks_air_gapped, "AWS::EC2::Route")
    assert not [r for r in routes.values() if r["Properties"].get("DestinationCidrBlock") == "0.0.0.0/0"]


def test_connected_keeps_its_nat_gateway_and_its_five_endpoints(eks_template: Template) -> None:
    assert len(resources_of(eks_template, "AWS::EC2::NatGateway")) == 1
    assert set(_interface_endpoints(eks_template)) == set(CONNECTED)


def test_the_endpoints_every_caller_needs_in_the_routes_az_only(eks_air_gapped: Template) -> None:
    endpoints = _interface_endpoints(eks_air_gapped)
    assert set(endpoints) == set(AIR_GAPPED)
    assert {
        "ec2",
        "ecr.api",
        "ecr.dkr",
        "ssm",
        "sqs",
        "eks",
        "eks-auth",
        "elasticloadbalancing",
        "lambda",
    } <= set(endpoints)
    assert "sts" not in endpoints  # IRSA's; the stack's pods use Pod Identity
    for name, endpoint in endpoints.items():
        assert endpoint["PrivateDnsEnabled"] is True, name
        assert len(endpoint["SubnetIds"]) == 1, name  # the route's AZ


def test_eks_and_eks_auth_take_no_policy_every_other_endpoint_this_accounts_principals_only(
    eks_air_gapped: Template,
) -> None:
    for name, endpoint in _interface_endpoints(eks_air_gapped).items():
        if name in ("eks", "eks-auth"):
            assert "PolicyDocument" not in endpoint
            continue
        for statement in endpoint["PolicyDocument"]["Statement"]:
            assert statement["Condition"] == {
                "StringEquals": {"aws:PrincipalAccount": {"Ref": "AWS::AccountId"}}
            }, name


def _in_vpc_roles(template: Template) -> set[str]:
    """Roles whose calls leave from inside the VPC: Pod Identity's, the nodes', the probe task's, and those of
    functions in the VPC."""
    resources = template.to_json()["Resources"]
    roles = {
        logical_id
        for logical_id, role in resources_of(template, "AWS::IAM::Role").items()
        if {"pods.eks.amazonaws.com", "ec2.amazonaws.com", "ecs-tasks.amazonaws.com"}
        & set(
            _listed(
                role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"].get("Service", [])
            )
        )
    }
    roles |= {
        function["Properties"]["Role"]["Fn::GetAtt"][0]
        for function in resources.values()
        if function["Type"] == "AWS::Lambda::Function" and "VpcConfig" in function["Properties"]
    }
    return roles


def _granted(template: Template, roles: set[str]) -> set[str]:
    actions: set[str] = set()
    for resource in template.to_json()["Resources"].values():
        if resource["Type"] not in ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy"):
            continue
        attached = {ref["Ref"] for ref in resource["Properties"].get("Roles", []) if "Ref" in ref}
        if attached & roles:
            for statement in resource["Properties"]["PolicyDocument"]["Statement"]:
                if statement["Effect"] == "Allow":
                    actions.update(_listed(statement["Action"]))
    return actions


def test_every_action_granted_to_a_caller_in_the_vpc_passes_its_endpoints_policy(
    eks_air_gapped: Template,
) -> None:
    """What Karpenter, the controllers, the workloads, the nodes and the kubectl provider may call, their
    endpoint lets through: an endpoint policy that forgot one would fail only on AWS, air-gapped."""
    endpoints = _interface_endpoints(eks_air_gapped)
    granted = _granted(eks_air_gapped, _in_vpc_roles(eks_air_gapped))
    checked = set()
    for action in granted:
        for name in ENDPOINTS_OF.get(action.split(":")[0], ()):
            allowed = [
                pattern.lower()
                for statement in endpoints[name]["PolicyDocument"]["Statement"]
                for pattern in _listed(statement["Action"])
            ]
            assert any(fnmatch.fnmatchcase(action.lower(), p) for p in allowed), (action, name)
            checked.add(action)
    # Karpenter's launches, KEDA's reads, the provider framework's invoke, the controller's targets.
    assert {
        "ec2:RunInstances",
        "ec2:CreateFleet",
        "cloudwatch:GetMetricData",
        "lambda:InvokeFunction",
        "elasticloadbalancing:RegisterTargets",
        "sqs:ReceiveMessage",
        "ssm:GetParameter",
        "secretsmanager:GetSecretValue",
    } <= checked


def test_vpc_cnis_network_interfaces_pass_the_ec2_endpoint(eks_air_gapped: Template) -> None:
    """vpc-cni runs with the node role's AWS managed policy (not in the template): its ENI calls by name."""
    allowed = [
        p
        for s in _interface_endpoints(eks_air_gapped)["ec2"]["PolicyDocument"]["Statement"]
        for p in _listed(s["Action"])
    ]
    for action in (
        "ec2:CreateNetworkInterface",
        "ec2:AttachNetworkInterface",
        "ec2:DeleteNetworkInterface",
        "ec2:AssignPrivateIpAddresses",
        "ec2:UnassignPrivateIpAddresses",
        "ec2:DescribeNetworkInterfaces",
    ):
        assert any(fnmatch.fnmatchcase(action, p) for p in allowed), action


def test_either_mode_nodes_pull_eks_add_on_images_through_the_ecr_endpoints(
    eks_template: Template, eks_air_gapped: Template
) -> None:
    for template in (eks_template, eks_air_gapped):
        endpoints = _interface_endpoints(template)
        for name in ("ecr.api", "ecr.dkr"):
            pulls = _statements(endpoints[name])["PullEksAddOnImages"]
            # The EKS guide's registry for us-east-2 (workloads/add-ons-images.adoc).
            assert rendered(pulls["Resource"]) == "arn:aws:ecr:us-east-2:602401143452:repository/*"
            assert "ecr:BatchGetImage" in pulls["Action"]


def test_either_mode_keda_reads_metrics_through_the_monitoring_endpoint(
    eks_template: Template, eks_air_gapped: Template
) -> None:
    for template in (eks_template, eks_air_gapped):
        statement = _statements(_interface_endpoints(template)["monitoring"])["ReadScalingMetricsNoResource"]
        assert statement["Action"] == "cloudwatch:GetMetricData"


def test_either_mode_the_kubectl_provider_answers_cloudformation_through_the_s3_gateway(
    eks_template: Template, eks_air_gapped: Template
) -> None:
    for template in (eks_template, eks_air_gapped):
        statements = _gateway_statements(template)
        writes = {
            sid
            for sid, s in statements.items()
            if set(_listed(s["Action"])) - {"s3:GetObject", "s3:ListBucket"}
        }
        assert writes == {"WriteTheProbeBucket", "AnswerCloudFormation"}
        answer = statements["AnswerCloudFormation"]
        assert answer["Action"] == "s3:PutObject" and answer["Principal"] == {"AWS": "*"}
        assert answer["Resource"] == "arn:aws:s3:::cloudformation-custom-resource-response-useast2/*"


def test_karpenter_runs_isolated_only_when_air_gapped(
    eks_template: Template, eks_air_gapped: Template
) -> None:
    def settings(template: Template) -> dict[str, Any]:
        (chart,) = [
            c
            for c in resources_of(template, "Custom::AWSCDK-EKS-HelmChart").values()
            if c["Properties"]["Release"] == "karpenter"
        ]
        values: dict[str, Any] = json.loads(rendered(chart["Properties"]["Values"]))["settings"]
        return values

    assert settings(eks_air_gapped)["isolatedVPC"] is True
    assert "isolatedVPC" not in settings(eks_template)


def test_karpenters_controller_calls_neither_iam_nor_pricing_beyond_passing_the_node_role(
    eks_air_gapped: Template,
) -> None:
    (role,) = [
        k for k in resources_of(eks_air_gapped, "AWS::IAM::Role") if k.startswith("KarpenterController")
    ]
    actions = _granted(eks_air_gapped, {role})
    assert {a for a in actions if a.startswith(("iam:", "pricing:"))} == {"iam:PassRole"}


def test_either_mode_the_node_class_names_the_stacks_instance_profile_for_the_node_role(
    eks_template: Template, eks_air_gapped: Template
) -> None:
    for template in (eks_template, eks_air_gapped):
        ((_, profile),) = resources_of(template, "AWS::IAM::InstanceProfile").items()
        (role,) = profile["Properties"]["Roles"]
        assert role["Ref"].startswith("KarpenterNodeRole")
        (node_class,) = [o for o in applied(template) if o["kind"] == "EC2NodeClass"]
        assert node_class["spec"]["instanceProfile"] == REF["AWS::IAM::InstanceProfile"]
        assert "role" not in node_class["spec"]
