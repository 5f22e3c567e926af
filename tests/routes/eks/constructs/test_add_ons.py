"""ClusterAddOns on a bare stack with an imported cluster, synthesized once: each chart's repository, version
and namespace; the Pod Identity roles, their trust and their associations; KEDA reads CloudWatch only; the
load balancer controller registers targets and creates nothing; the GPU DaemonSets tolerate the GPU taint."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import App, CfnParameter, Environment, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Template
from aws_cdk.lambda_layer_kubectl_v36 import KubectlV36Layer

from sonic_deploy.routes.eks.charts import (
    DCGM_EXPORTER,
    DEVICE_PLUGIN,
    KEDA,
    LOAD_BALANCER_CONTROLLER,
    SECRETS_PROVIDER_AWS,
    SECRETS_STORE_CSI_DRIVER,
    ChartPin,
)
from sonic_deploy.routes.eks.constructs.add_on_policies import load_balancer_controller_statements
from sonic_deploy.routes.eks.constructs.add_ons import GPU_NODE_SELECTOR, GPU_TOLERATION, ClusterAddOns
from tests.cdk_context import cli_context
from tests.conftest import resources_of

CLUSTER, VPC, REGION = "sonic-test", "vpc-0123456789abcdef0", "us-east-2"
SYSTEM = {"sonic.cartesia.ai/pool": "system"}
TARGET_GROUP = "arn:aws:elasticloadbalancing:us-east-2:111111111111:targetgroup/sonic-api/0123456789abcdef"


class Synth:
    def __init__(self) -> None:
        stack = Stack(
            App(context=cli_context()), "Test", env=Environment(account="111111111111", region=REGION)
        )
        # 2.275's imported cluster ignores `kubectl_provider_options` (ImportedCluster reads `kubectl_provider`
        # only: "Kubectl Provider is not defined in this cluster"), so the provider is made for it and given.
        provider = eks.KubectlProvider(
            stack,
            "Kubectl",
            cluster=eks.Cluster.from_cluster_attributes(stack, "Named", cluster_name=CLUSTER),
            kubectl_layer=KubectlV36Layer(stack, "KubectlLayer"),
        )
        cluster = eks.Cluster.from_cluster_attributes(
            stack, "Cluster", cluster_name=CLUSTER, kubectl_provider=provider
        )
        self.stack = stack
        self.add_ons = ClusterAddOns(
            stack,
            "AddOns",
            cluster=cluster,
            vpc_id=VPC,
            system_node_selector=SYSTEM,
            target_group_arns=[TARGET_GROUP],
        )
        self.template = Template.from_stack(stack)
        self.charts = {
            chart["Properties"]["Chart"]: (logical_id, chart)
            for logical_id, chart in resources_of(self.template, "Custom::AWSCDK-EKS-HelmChart").items()
        }
        self.roles = resources_of(self.template, "AWS::IAM::Role")
        self.policies = resources_of(self.template, "AWS::IAM::ManagedPolicy")

    def values(self, pin: ChartPin) -> dict[str, Any]:
        rendered = self.charts[pin.chart][1]["Properties"]["Values"]
        assert isinstance(rendered, str)  # no token in them: the cluster's name, VPC and Region are literals
        values: dict[str, Any] = json.loads(rendered)
        return values

    def policy_of(self, role_prefix: str) -> list[dict[str, Any]]:
        (role_id,) = [r for r in self.roles if r.startswith(role_prefix)]
        (policy,) = [
            p for p in self.policies.values() if {"Ref": role_id} in p["Properties"].get("Roles", [])
        ]
        statements: list[dict[str, Any]] = policy["Properties"]["PolicyDocument"]["Statement"]
        return statements


@pytest.fixture(scope="module")
def synth() -> Synth:
    return Synth()


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else list(actions)


@pytest.mark.parametrize(
    ("pin", "namespace"),
    [
        (LOAD_BALANCER_CONTROLLER, "kube-system"),
        (KEDA, "keda"),
        (DEVICE_PLUGIN, "kube-system"),
        (DCGM_EXPORTER, "kube-system"),
        (SECRETS_STORE_CSI_DRIVER, "kube-system"),
        (SECRETS_PROVIDER_AWS, "kube-system"),
    ],
)
def test_each_chart_is_pinned_from_its_repository(synth: Synth, pin: ChartPin, namespace: str) -> None:
    properties = synth.charts[pin.chart][1]["Properties"]
    assert properties["Repository"] == pin.repository
    assert properties["Version"] == pin.version
    assert properties["Namespace"] == namespace
    assert properties["Release"] == pin.chart
    assert properties["ClusterName"] == CLUSTER


def test_the_six_releases_and_no_more(synth: Synth) -> None:
    assert len(synth.charts) == len(synth.add_ons.releases) == 6


def test_pod_identity_roles_trust_the_eks_pods_principal_with_session_tags(synth: Synth) -> None:
    assert len(synth.roles) >= 2
    for prefix, namespace, account in (
        ("AddOnsLoadBalancerControllerRole", "kube-system", "aws-load-balancer-controller"),
        ("AddOnsKedaOperatorRole", "keda", "keda-operator"),
    ):
        (role,) = [r for logical_id, r in synth.roles.items() if logical_id.startswith(prefix)]
        (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
        assert sorted(_actions(trust)) == ["sts:AssumeRole", "sts:TagSession"]
        # Only the controller's own service account, in its namespace, may have it.
        tags = trust["Condition"]["StringEquals"]
        assert tags["aws:RequestTag/kubernetes-namespace"] == namespace
        assert tags["aws:RequestTag/kubernetes-service-account"] == [account]


def test_associations_name_each_controllers_namespace_and_service_account(synth: Synth) -> None:
    associations = resources_of(synth.template, "AWS::EKS::PodIdentityAssociation")
    by_account = {
        (a["Properties"]["Namespace"], a["Properties"]["ServiceAccount"]): a["Properties"]
        for a in associations.values()
    }
    assert set(by_account) == {("kube-system", "aws-load-balancer-controller"), ("keda", "keda-operator")}
    lbc_role = next(r for r in synth.roles if r.startswith("AddOnsLoadBalancerControllerRole"))
    keda_role = next(r for r in synth.roles if r.startswith("AddOnsKedaOperatorRole"))
    assert by_account["kube-system", "aws-load-balancer-controller"]["RoleArn"] == {
        "Fn::GetAtt": [lbc_role, "Arn"]
    }
    assert by_account["keda", "keda-operator"]["RoleArn"] == {"Fn::GetAtt": [keda_role, "Arn"]}
    assert all(a["ClusterName"] == CLUSTER for a in by_account.values())
    # The charts name the same service accounts.
    assert synth.values(LOAD_BALANCER_CONTROLLER)["serviceAccount"]["name"] == "aws-load-balancer-controller"
    assert synth.values(KEDA)["serviceAccount"]["operator"]["name"] == "keda-operator"


def test_the_controllers_pods_start_after_their_association(synth: Synth) -> None:
    for pin, association in ((LOAD_BALANCER_CONTROLLER, "LoadBalancerControllerIdentity"), (KEDA, "Keda")):
        depends_on = synth.charts[pin.chart][1].get("DependsOn", [])
        assert any(d.startswith("AddOns") and association in d for d in depends_on), depends_on


def test_keda_may_read_cloudwatch_metric_data_only(synth: Synth) -> None:
    (statement,) = synth.policy_of("AddOnsKedaOperatorRole")
    assert statement["Effect"] == "Allow"
    assert _actions(statement) == ["cloudwatch:GetMetricData"]


def test_the_load_balancer_controller_registers_targets_and_creates_nothing(synth: Synth) -> None:
    statements = synth.policy_of("AddOnsLoadBalancerControllerRole")
    actions = {action for statement in statements for action in _actions(statement)}
    assert "elasticloadbalancing:CreateLoadBalancer" not in actions
    assert not {
        a for a in actions if a.split(":")[1].startswith(("Create", "Delete", "Modify", "Set", "Add"))
    }
    by_sid = {statement["Sid"]: statement for statement in statements}
    register = by_sid["RegisterPodsInTheTargetGroup"]
    assert sorted(_actions(register)) == [
        "elasticloadbalancing:DeregisterTargets",
        "elasticloadbalancing:RegisterTargets",
    ]
    assert register["Resource"] == TARGET_GROUP
    ingress = by_sid["OpenTheClustersTaggedGroupsToTheLoadBalancer"]
    assert ingress["Condition"]["Null"] == {f"aws:ResourceTag/kubernetes.io/cluster/{CLUSTER}": "false"}
    reads = by_sid["ReadTargetGroupsAndTheNetwork"]
    assert all(":Describe" in action for action in _actions(reads))


def test_the_load_balancer_controller_knows_its_cluster_and_runs_on_system_nodes(synth: Synth) -> None:
    values = synth.values(LOAD_BALANCER_CONTROLLER)
    assert (values["clusterName"], values["vpcId"], values["region"]) == (CLUSTER, VPC, REGION)
    assert values["nodeSelector"] == SYSTEM
    assert values["enableServiceMutatorWebhook"] is False
    assert values["controllerConfig"]["featureGates"]["EnableServiceController"] is False
    assert synth.values(KEDA)["nodeSelector"] == SYSTEM


@pytest.mark.parametrize("pin", [DEVICE_PLUGIN, DCGM_EXPORTER])
def test_the_gpu_daemonsets_tolerate_the_gpu_taint_on_gpu_nodes_only(synth: Synth, pin: ChartPin) -> None:
    values = synth.values(pin)
    assert values["tolerations"] == [dict(GPU_TOLERATION)]
    assert GPU_TOLERATION == {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    if pin is DCGM_EXPORTER:
        assert values["nodeSelector"] == dict(GPU_NODE_SELECTOR)
    else:
        (term,) = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        assert term == {
            "matchExpressions": [
                {"key": "karpenter.k8s.aws/instance-gpu-manufacturer", "operator": "In", "values": ["nvidia"]}
            ]
        }


def test_dcgm_exporter_runs_without_sys_admin_and_without_a_service_monitor(synth: Synth) -> None:
    values = synth.values(DCGM_EXPORTER)
    assert values["securityContext"]["capabilities"] == {"add": [], "drop": ["ALL"]}
    assert values["serviceMonitor"] == {"enabled": False}


def test_secrets_reach_pods_through_the_csi_driver_and_ascp(synth: Synth) -> None:
    driver = synth.values(SECRETS_STORE_CSI_DRIVER)
    assert driver["syncSecret"] == {"enabled": True}
    assert {"audience": "pods.eks.amazonaws.com"} in driver["tokenRequests"]
    provider = synth.values(SECRETS_PROVIDER_AWS)
    assert provider["secrets-store-csi-driver"] == {"install": False}
    assert provider["tolerations"] == [dict(GPU_TOLERATION)]


def test_a_new_clusters_name_reaches_the_tag_condition_at_deploy() -> None:
    """A token in a condition key cannot be a JSON key in the template: CfnJson resolves it at deploy. No synth:
    the statement is resolved on its own stack."""
    stack = Stack(App(), "Tokens")
    name = CfnParameter(stack, "ClusterName").value_as_string
    statements = load_balancer_controller_statements(
        stack, cluster_name=name, vpc_id=VPC, target_group_arns=()
    )
    by_sid = {statement.sid: stack.resolve(statement.to_statement_json()) for statement in statements}
    condition = by_sid["OpenTheClustersTaggedGroupsToTheLoadBalancer"]["Condition"]["Null"]
    assert set(condition) == {"Fn::GetAtt"} and condition["Fn::GetAtt"][1] == "Value"  # CfnJson's value
    resource = by_sid["RegisterPodsInTheTargetGroup"]["Resource"]
    assert resource["Fn::Join"][1][-1] == ":targetgroup/*/*"
