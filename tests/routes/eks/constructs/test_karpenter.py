"""KarpenterController on a bare stack with an imported cluster: the node role, its instance profile and its
EC2_LINUX access entry, the encrypted interruption queue and its rules, the controller's Pod Identity role and
scoped policy, and the two Helm releases; in an isolated VPC too. One synth for the module, with every cdk-nag
pack, as `make compliance` runs them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import Aws, Environment, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk.assertions import Template
from aws_cdk.lambda_layer_kubectl_v36 import KubectlV36Layer

from sonic_deploy.compliance.scan import Synthesized, nag_app, synth_and_report
from sonic_deploy.constructs.encryption import EncryptionKey
from sonic_deploy.routes.eks.charts import KARPENTER_VERSION
from sonic_deploy.routes.eks.constructs.karpenter import INTERRUPTION_EVENTS, KarpenterController
from tests.conftest import rendered, resources_of

CLUSTER = "sonic-test"
ISOLATED = "sonic-other"
SYSTEM = {"sonic.cartesia.ai/pool": "system"}


def _imported_cluster(stack: Stack, name: str) -> eks.ICluster:
    """An existing cluster as 2.275 imports one with a kubectl Lambda: ImportedCluster ignores
    `kubectl_provider_options` (aws-eks-v2/lib/cluster.js), so the provider is made first and passed in."""
    bare = eks.Cluster.from_cluster_attributes(stack, f"{name}Bare", cluster_name=name)
    layer = KubectlV36Layer(stack, f"{name}Kubectl")
    provider = eks.KubectlProvider(stack, f"{name}KubectlProvider", cluster=bare, kubectl_layer=layer)
    return eks.Cluster.from_cluster_attributes(
        stack, f"{name}Cluster", cluster_name=name, kubectl_provider=provider
    )


@pytest.fixture(scope="module")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Template, Synthesized]:
    """`Karpenter` on sonic-test, the node role serving vpc-cni; `OwnCni` on sonic-other, vpc-cni with a role of
    its own, in an isolated VPC (air-gapped). Both in one stack: one synth."""
    app = nag_app(tmp_path_factory.mktemp("karpenter"))
    stack = Stack(app, "Test", env=Environment(account="111111111111", region="us-east-2"))
    key = EncryptionKey(stack, "Key", alias="alias/sonic-test").key
    for construct_id, name, cni in (("Karpenter", CLUSTER, True), ("OwnCni", ISOLATED, False)):
        KarpenterController(
            stack,
            construct_id,
            cluster=_imported_cluster(stack, name),
            cluster_name=name,
            key=key,
            system_node_selector=SYSTEM,
            vpc_cni_uses_node_role=cni,
            isolated_vpc=not cni,
        )
    report = synth_and_report(app)
    template = json.loads((report.assembly / "Test.template.json").read_text())
    return Template.from_json(template), report


@pytest.fixture(scope="module")
def template(synthesized: tuple[Template, Synthesized]) -> Template:
    return synthesized[0]


def _of(template: Template, type_name: str, prefix: str = "Karpenter") -> dict[str, Any]:
    """The resources of a type under one KarpenterController, by logical id."""
    return {k: v for k, v in resources_of(template, type_name).items() if k.startswith(prefix)}


def _one(template: Template, type_name: str, prefix: str = "Karpenter") -> tuple[str, dict[str, Any]]:
    ((logical_id, resource),) = _of(template, type_name, prefix).items()
    return logical_id, resource


def _controller_statements(template: Template, prefix: str = "Karpenter") -> dict[str, dict[str, Any]]:
    """The statements of the policies on the controller role, by Sid."""
    role, _ = next(
        (k, v) for k, v in _of(template, "AWS::IAM::Role", prefix).items() if "ControllerRole" in k
    )
    return {
        statement["Sid"]: statement
        for policy in _of(template, "AWS::IAM::ManagedPolicy", prefix).values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    }


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_the_queue_is_encrypted_with_the_key_ssl_only_and_keeps_notices_five_minutes(
    template: Template,
) -> None:
    queue_id, queue = _one(template, "AWS::SQS::Queue")
    (key_id,) = resources_of(template, "AWS::KMS::Key")
    assert queue["Properties"] == {
        "KmsMasterKeyId": {"Fn::GetAtt": [key_id, "Arn"]},
        "MessageRetentionPeriod": 300,
    }
    _, policy = _one(template, "AWS::SQS::QueuePolicy")
    (deny,) = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Deny"]
    assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert deny["Action"] == "sqs:*" and deny["Resource"] == {"Fn::GetAtt": [queue_id, "Arn"]}


def test_each_interruption_rule_targets_the_queue_and_only_they_may_send(template: Template) -> None:
    queue_id, _ = _one(template, "AWS::SQS::Queue")
    rules = _of(template, "AWS::Events::Rule")
    patterns = {
        (
            rule["Properties"]["EventPattern"]["source"][0],
            rule["Properties"]["EventPattern"]["detail-type"][0],
        )
        for rule in rules.values()
    }
    assert patterns == {(source, detail_type) for source, detail_type, _ in INTERRUPTION_EVENTS.values()}
    assert {
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
        "AWS Health Event",
    } <= {detail_type for _, detail_type in patterns}
    for rule in rules.values():
        (target,) = rule["Properties"]["Targets"]
        assert target["Arn"] == {"Fn::GetAtt": [queue_id, "Arn"]}
    (health,) = [r for r in rules.values() if r["Properties"]["EventPattern"]["source"] == ["aws.health"]]
    assert health["Properties"]["EventPattern"]["detail"] == {
        "service": ["EC2"],
        "eventTypeCategory": ["scheduledChange"],
    }
    _, policy = _one(template, "AWS::SQS::QueuePolicy")
    allowed = {
        s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"
    }
    events = allowed["TheInterruptionRulesSend"]
    assert (
        events["Principal"] == {"Service": "events.amazonaws.com"} and events["Action"] == "sqs:SendMessage"
    )
    assert sorted(events["Condition"]["ArnEquals"]["aws:SourceArn"], key=str) == sorted(
        ({"Fn::GetAtt": [rule_id, "Arn"]} for rule_id in rules), key=str
    )
    sqs = allowed["SqsOnThisAccountsBehalfSends"]
    assert sqs["Principal"] == {"Service": "sqs.amazonaws.com"} and sqs["Action"] == "sqs:SendMessage"
    assert sqs["Condition"] == {"StringEquals": {"aws:SourceAccount": "111111111111"}}
    assert set(allowed) == {"TheInterruptionRulesSend", "SqsOnThisAccountsBehalfSends"}


def test_eventbridge_may_encrypt_with_the_key_and_the_controller_decrypts_through_sqs(
    template: Template,
) -> None:
    ((_, key),) = resources_of(template, "AWS::KMS::Key").items()
    statements = {s.get("Sid"): s for s in key["Properties"]["KeyPolicy"]["Statement"]}
    events = statements["EventBridgeEncryptsForKarpenter"]
    assert events["Principal"] == {"Service": "events.amazonaws.com"}
    assert sorted(events["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey"]
    assert events["Condition"] == {"StringEquals": {"aws:SourceAccount": "111111111111"}}
    assert "UseThroughSqs" in statements
    decrypt = _controller_statements(template)["DecryptTheQueueThroughSqs"]
    assert decrypt["Action"] == "kms:Decrypt"
    assert rendered(decrypt["Condition"]["StringEquals"]["kms:ViaService"]) == "sqs.CFN_Ref.amazonaws.com"


def test_pass_role_only_for_the_node_role_and_only_to_ec2(template: Template) -> None:
    node_role, _ = next((k, v) for k, v in _of(template, "AWS::IAM::Role").items() if "NodeRole" in k)
    statements = _controller_statements(template)
    passing = [s for s in statements.values() if "iam:PassRole" in _listed(s["Action"])]
    assert passing == [statements["PassOnlyTheNodeRoleToEc2"]]
    assert passing[0]["Resource"] == {"Fn::GetAtt": [node_role, "Arn"]}
    assert passing[0]["Condition"]["StringEquals"]["iam:PassedToService"][0] == "ec2.amazonaws.com"


def test_launches_are_held_to_the_clusters_tags(template: Template) -> None:
    """RunInstances and CreateFleet: unconditioned only on what a launch uses but does not create (images,
    snapshots, subnets, groups, reservations, placement groups); on anything else, the cluster's tags."""
    owned = f"kubernetes.io/cluster/{CLUSTER}"
    launching = {
        sid: s
        for sid, s in _controller_statements(template).items()
        if "ec2:RunInstances" in _listed(s["Action"])
    }
    assert set(launching) == {
        "LaunchFromImagesSubnetsAndGroups",
        "LaunchFromItsOwnTemplates",
        "CreateOnlyTaggedForThisCluster",
    }
    used = json.dumps(launching["LaunchFromImagesSubnetsAndGroups"]["Resource"])
    for kind in ("image", "snapshot", "security-group", "subnet", "capacity-reservation", "placement-group"):
        assert f":{kind}/*" in used
    assert ":instance/" not in used and ":launch-template/" not in used and '"*"' not in used
    templates = launching["LaunchFromItsOwnTemplates"]["Condition"]
    assert templates["StringEquals"] == {f"aws:ResourceTag/{owned}": "owned"}
    assert templates["StringLike"] == {"aws:ResourceTag/karpenter.sh/nodepool": "*"}
    created = launching["CreateOnlyTaggedForThisCluster"]["Condition"]
    assert created["StringEquals"] == {
        f"aws:RequestTag/{owned}": "owned",
        "aws:RequestTag/eks:eks-cluster-name": CLUSTER,
    }
    assert created["StringLike"] == {"aws:RequestTag/karpenter.sh/nodepool": "*"}


def test_every_change_is_conditioned_and_only_reads_are_on_everything(template: Template) -> None:
    statements = _controller_statements(template)
    on_everything = {sid for sid, s in statements.items() if s["Resource"] == "*"}
    assert on_everything == {"ListInstanceProfiles", "DiscoverInThisRegion", "ReadPrices"}
    assert statements["DiscoverInThisRegion"]["Condition"]["StringEquals"]["aws:RequestedRegion"] == {
        "Ref": "AWS::Region"
    }
    changes = ("ec2:CreateTags", "ec2:TerminateInstances", "ec2:DeleteLaunchTemplate")
    for sid, statement in statements.items():
        if set(changes) & set(_listed(statement["Action"])):
            assert "Condition" in statement, sid
    ssm = statements["ReadEksAmiParameters"]["Resource"]
    assert rendered(ssm) == "arn:CFN_Ref:ssm:CFN_Ref::parameter/aws/service/eks/optimized-ami/*"
    assert rendered(statements["FindThisCluster"]["Resource"]).endswith(f":cluster/{CLUSTER}")
    queue_id, _ = _one(template, "AWS::SQS::Queue")
    assert statements["ReadTheInterruptionQueue"]["Resource"] == {"Fn::GetAtt": [queue_id, "Arn"]}


def test_the_nodes_run_with_the_stacks_instance_profile_and_karpenter_writes_nothing_in_iam(
    template: Template,
) -> None:
    """The EC2NodeClass names the stack's profile (spec.instanceProfile): Karpenter creates, tags, fills and
    deletes none. Outside an isolated VPC it still reads and lists profiles (its finalizer and garbage
    collector); inside, it calls IAM and the pricing API not at all."""
    for prefix in ("Karpenter", "OwnCni"):
        node_role = next(k for k in _of(template, "AWS::IAM::Role", prefix) if "NodeRole" in k)
        _, profile = _one(template, "AWS::IAM::InstanceProfile", prefix)
        assert profile["Properties"]["Roles"] == [{"Ref": node_role}]
    iam = {
        prefix: {
            action
            for statement in _controller_statements(template, prefix).values()
            for action in _listed(statement["Action"])
            if action.startswith(("iam:", "pricing:"))
        }
        for prefix in ("Karpenter", "OwnCni")
    }
    assert iam["Karpenter"] == {
        "iam:PassRole",
        "iam:GetInstanceProfile",
        "iam:ListInstanceProfiles",
        "pricing:GetProducts",
    }
    assert iam["OwnCni"] == {"iam:PassRole"}


def test_in_an_isolated_vpc_the_chart_says_so(template: Template) -> None:
    charts = {
        c["Properties"]["Release"]: c
        for c in _of(template, "Custom::AWSCDK-EKS-HelmChart", "OwnCni").values()
    }
    values = json.loads(rendered(charts["karpenter"]["Properties"]["Values"]))
    assert values["settings"] == {
        "clusterName": ISOLATED,
        "interruptionQueue": "CFN_Fn_GetAtt",
        "isolatedVPC": True,
    }


def test_the_controller_role_trusts_pod_identity_for_its_service_account_only(template: Template) -> None:
    role = next(v for k, v in _of(template, "AWS::IAM::Role").items() if "ControllerRole" in k)
    (trust,) = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    assert sorted(trust["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    assert trust["Condition"] == {
        "StringEquals": {
            "aws:RequestTag/eks-cluster-name": CLUSTER,
            "aws:RequestTag/kubernetes-namespace": "kube-system",
            "aws:RequestTag/kubernetes-service-account": "karpenter",
        }
    }
    role_id = next(k for k in _of(template, "AWS::IAM::Role") if "ControllerRole" in k)
    _, association = _one(template, "AWS::EKS::PodIdentityAssociation")
    assert association["Properties"] == {
        "ClusterName": CLUSTER,
        "Namespace": "kube-system",
        "ServiceAccount": "karpenter",
        "RoleArn": {"Fn::GetAtt": [role_id, "Arn"]},
    }


def test_the_node_role_has_an_ec2_linux_access_entry_and_the_cni_policy_only_when_vpc_cni_uses_it(
    template: Template,
) -> None:
    def policies(prefix: str) -> set[str]:
        role = next(v for k, v in _of(template, "AWS::IAM::Role", prefix).items() if "NodeRole" in k)
        return {rendered(arn).rpartition("/")[2] for arn in role["Properties"]["ManagedPolicyArns"]}

    node = {"AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryPullOnly"}
    assert policies("Karpenter") == node | {"AmazonEKS_CNI_Policy"}
    assert policies("OwnCni") == node
    node_role = next(k for k in _of(template, "AWS::IAM::Role") if "NodeRole" in k)
    _, entry = _one(template, "AWS::EKS::AccessEntry")
    assert entry["Properties"] == {
        "AccessPolicies": [],
        "ClusterName": CLUSTER,
        "PrincipalArn": {"Fn::GetAtt": [node_role, "Arn"]},
        "Type": "EC2_LINUX",
    }


def test_the_chart_is_pinned_with_the_clusters_settings_and_no_irsa(template: Template) -> None:
    charts = {
        c["Properties"]["Release"]: (k, c) for k, c in _of(template, "Custom::AWSCDK-EKS-HelmChart").items()
    }
    crd_id, crds = charts["karpenter-crd"]
    _, chart = charts["karpenter"]
    assert crds["Properties"]["Repository"] == "oci://public.ecr.aws/karpenter/karpenter-crd"
    assert chart["Properties"]["Repository"] == "oci://public.ecr.aws/karpenter/karpenter"
    assert crds["Properties"]["Version"] == chart["Properties"]["Version"] == KARPENTER_VERSION == "1.14.1"
    assert chart["Properties"]["Namespace"] == crds["Properties"]["Namespace"] == "kube-system"
    assert chart["Properties"]["Wait"] is True
    values = json.loads(rendered(chart["Properties"]["Values"]))
    assert values["settings"] == {"clusterName": CLUSTER, "interruptionQueue": "CFN_Fn_GetAtt"}
    queue_id, _ = _one(template, "AWS::SQS::Queue")
    assert {"Fn::GetAtt": [queue_id, "QueueName"]} in chart["Properties"]["Values"]["Fn::Join"][1]
    assert values["serviceAccount"] == {"create": True, "name": "karpenter"}
    assert "eks.amazonaws.com/role-arn" not in json.dumps(values)
    assert values["replicas"] == 2
    assert values["nodeSelector"] == {"kubernetes.io/os": "linux", **SYSTEM}
    # After the CRDs, the Pod Identity association, the node's access entry and the policies.
    needs = set(chart["DependsOn"])
    association, _ = _one(template, "AWS::EKS::PodIdentityAssociation")
    entry, _ = _one(template, "AWS::EKS::AccessEntry")
    assert {crd_id, association, entry, *_of(template, "AWS::IAM::ManagedPolicy")} <= needs


def test_no_finding_of_the_rule_packs_is_left_open(synthesized: tuple[Template, Synthesized]) -> None:
    _, report = synthesized
    open_findings = [
        str(f) for f in report.findings if f.where.startswith(("Test/Karpenter/", "Test/OwnCni/"))
    ]
    assert open_findings == []
    # The packs ran: what they found here is acknowledged, each with its reason.
    acknowledged = {
        a.rule.partition("[")[0] for a in report.acknowledged if a.where.startswith("Test/Karpenter/")
    }
    assert {"AwsSolutions-IAM4", "AwsSolutions-IAM5", "AwsSolutions-SQS3"} <= acknowledged


def test_a_token_for_a_name_and_a_karpenter_before_1_13_are_refused() -> None:
    stack = Stack()
    cluster = eks.Cluster.from_cluster_attributes(stack, "Cluster", cluster_name="sonic-test")
    key = EncryptionKey(stack, "Key", alias="alias/sonic-test").key
    common: dict[str, Any] = {"cluster": cluster, "key": key, "system_node_selector": SYSTEM}
    with pytest.raises(ValueError, match="not a token"):
        KarpenterController(
            stack, "Named", cluster_name=Aws.STACK_NAME, vpc_cni_uses_node_role=True, **common
        )
    with pytest.raises(ValueError, match=r"older than 1\.13"):
        KarpenterController(
            stack,
            "Old",
            cluster_name="sonic-test",
            vpc_cni_uses_node_role=True,
            chart_version="1.12.2",
            **common,
        )
