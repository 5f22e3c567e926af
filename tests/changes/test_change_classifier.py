"""The change classifier on crafted before/after templates (no synthesis: every case is written out here)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sonic_deploy.changes import CRITICAL_TYPES, ChangeKind, ResourceChange, StackChanges, classify


def template(**resources: dict[str, Any]) -> dict[str, Any]:
    return {"Resources": resources}


def resource(resource_type: str, **properties: Any) -> dict[str, Any]:
    return {"Type": resource_type, "Properties": properties}


def only_change(changes: StackChanges, logical_id: str) -> ResourceChange:
    found = [c for c in changes.changes if c.logical_id == logical_id]
    assert len(found) == 1, changes
    return found[0]


# One create-only property per critical type; changing it makes CloudFormation replace the resource.
REPLACING_EDITS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "AWS::SageMaker::Endpoint": (
        {"EndpointName": "sonic-dev", "EndpointConfigName": "cfg"},
        {"EndpointName": "sonic-dev-2", "EndpointConfigName": "cfg"},
    ),
    "AWS::SageMaker::Model": (
        {"PrimaryContainer": {"ModelPackageName": "arn:aws:sagemaker:us-east-2:1:model-package/a"}},
        {"PrimaryContainer": {"ModelPackageName": "arn:aws:sagemaker:us-east-2:1:model-package/b"}},
    ),
    "AWS::ECS::Service": (
        {"ServiceName": "worker", "Cluster": "c"},
        {"ServiceName": "gpu-worker", "Cluster": "c"},
    ),
    "AWS::EC2::PlacementGroup": ({"Strategy": "cluster"}, {"Strategy": "spread"}),
    "AWS::ECR::Repository": ({"RepositoryName": "sonic/worker"}, {"RepositoryName": "sonic/gpu-worker"}),
    "AWS::SecretsManager::Secret": ({"Name": "sonic/licence"}, {"Name": "sonic/license"}),
    # A new network.cidr (or its halves): the VPC and everything in it is replaced.
    "AWS::EC2::VPC": ({"CidrBlock": "10.60.0.0/16"}, {"CidrBlock": "10.60.128.0/17"}),
    "AWS::EFS::FileSystem": ({"PerformanceMode": "generalPurpose"}, {"PerformanceMode": "maxIO"}),
    # The EKS route: a new cluster name ([eks] resource prefix), a new system instance type.
    "AWS::EKS::Cluster": (
        {"Name": "sonic-dev-eks", "RoleArn": "r"},
        {"Name": "sonic-dev-eks-2", "RoleArn": "r"},
    ),
    "AWS::EKS::Nodegroup": (
        {"ClusterName": "c", "NodeRole": "r", "Subnets": ["s"], "InstanceTypes": ["m7i.xlarge"]},
        {"ClusterName": "c", "NodeRole": "r", "Subnets": ["s"], "InstanceTypes": ["m7i.2xlarge"]},
    ),
    # The GPU hosts' or nodes' profile under a new path.
    "AWS::IAM::InstanceProfile": ({"Roles": ["r"], "Path": "/"}, {"Roles": ["r"], "Path": "/sonic/"}),
}
# Custom resources are never assumed replaced (test_custom_resources_are_never_assumed_replaced): removed,
# or under a new logical ID, is how they go (tested below).
REMOVED_ONLY = {"AWS::KMS::Key", "Custom::AWSCDK-EKS-KubernetesResource", "Custom::AWSCDK-EKS-HelmChart"}


def test_every_critical_type_has_a_replacement_case_or_is_covered_by_removal() -> None:
    # AWS::KMS::Key has no create-only property: it is replaced only through a new logical ID (tested below).
    assert set(REPLACING_EDITS) | REMOVED_ONLY == set(CRITICAL_TYPES)


@pytest.mark.parametrize("resource_type", sorted(REPLACING_EDITS))
def test_replacing_a_critical_resource_is_dangerous(resource_type: str) -> None:
    before_props, after_props = REPLACING_EDITS[resource_type]
    changes = classify(
        template(Thing=resource(resource_type, **before_props)),
        template(Thing=resource(resource_type, **after_props)),
    )
    change = only_change(changes, "Thing")
    assert change.kind is ChangeKind.REPLACED
    assert change.dangerous
    assert any("create-only" in reason or "cannot be updated in place" in reason for reason in change.reasons)
    assert changes.dangerous == (change,)


def test_endpoint_under_a_new_logical_id_is_removed_and_added_and_dangerous() -> None:
    endpoint = resource("AWS::SageMaker::Endpoint", EndpointConfigName="cfg")
    changes = classify(template(Endpoint=endpoint), template(SonicEndpoint=copy.deepcopy(endpoint)))
    assert [(c.logical_id, c.kind) for c in changes.changes] == [
        ("SonicEndpoint", ChangeKind.ADDED),
        ("Endpoint", ChangeKind.REMOVED),
    ]
    assert [c.logical_id for c in changes.dangerous] == ["Endpoint"]


def test_kms_key_under_a_new_logical_id_is_dangerous_and_retained_is_reported() -> None:
    key = {"Type": "AWS::KMS::Key", "Properties": {"EnableKeyRotation": True}, "DeletionPolicy": "Retain"}
    changes = classify(template(Key1=key), template(Key2=copy.deepcopy(key)))
    removed = only_change(changes, "Key1")
    assert removed.kind is ChangeKind.REMOVED and removed.dangerous and removed.retained


@pytest.mark.parametrize(
    "resource_type", ["Custom::AWSCDK-EKS-KubernetesResource", "Custom::AWSCDK-EKS-HelmChart"]
)
def test_eks_objects_under_a_new_logical_id_are_dangerous_but_changed_in_place_are_not(
    resource_type: str,
) -> None:
    """A manifest or Helm release renamed: CloudFormation applies the new one, then deletes the old one, which
    deletes the same objects (or uninstalls the same release) from the cluster."""
    before = resource(resource_type, ServiceToken="t", ClusterName="c", Manifest="[1]")
    renamed = classify(template(Workloads=before), template(SonicWorkloads=copy.deepcopy(before)))
    assert [(c.logical_id, c.kind) for c in renamed.changes] == [
        ("SonicWorkloads", ChangeKind.ADDED),
        ("Workloads", ChangeKind.REMOVED),
    ]
    assert [c.logical_id for c in renamed.dangerous] == ["Workloads"]
    assert "live calls" in renamed.dangerous[0].why_dangerous
    after = resource(resource_type, ServiceToken="t", ClusterName="c", Manifest="[2]")
    applied = only_change(classify(template(Workloads=before), template(Workloads=after)), "Workloads")
    assert applied.kind is ChangeKind.CHANGED and not applied.dangerous


def test_harmless_tag_change_on_the_endpoint_is_an_update() -> None:
    before = resource(
        "AWS::SageMaker::Endpoint", EndpointConfigName="cfg", Tags=[{"Key": "team", "Value": "a"}]
    )
    after = resource(
        "AWS::SageMaker::Endpoint", EndpointConfigName="cfg", Tags=[{"Key": "team", "Value": "b"}]
    )
    changes = classify(template(Endpoint=before), template(Endpoint=after))
    change = only_change(changes, "Endpoint")
    assert change.kind is ChangeKind.CHANGED
    assert change.changed == ("Tags",)
    assert not change.dangerous and not change.highlights


def test_tag_change_on_the_placement_group_replaces_it() -> None:
    # EC2 placement groups cannot be updated at all: even a tag change replaces them.
    before = resource("AWS::EC2::PlacementGroup", Strategy="cluster", Tags=[{"Key": "a", "Value": "1"}])
    after = resource("AWS::EC2::PlacementGroup", Strategy="cluster", Tags=[{"Key": "a", "Value": "2"}])
    change = only_change(classify(template(Group=before), template(Group=after)), "Group")
    assert change.kind is ChangeKind.REPLACED and change.dangerous


def test_replacing_a_non_critical_resource_is_not_dangerous() -> None:
    before = resource("AWS::SageMaker::EndpointConfig", ProductionVariants=[{"InitialInstanceCount": 2}])
    after = resource("AWS::SageMaker::EndpointConfig", ProductionVariants=[{"InitialInstanceCount": 3}])
    change = only_change(classify(template(Config=before), template(Config=after)), "Config")
    assert change.kind is ChangeKind.REPLACED
    assert not change.dangerous


def test_model_replacement_cascades_to_the_endpoint_config_and_updates_the_endpoint() -> None:
    def stack(package: str) -> dict[str, Any]:
        return template(
            Model=resource("AWS::SageMaker::Model", PrimaryContainer={"ModelPackageName": package}),
            Config=resource(
                "AWS::SageMaker::EndpointConfig",
                ProductionVariants=[{"ModelName": {"Fn::GetAtt": ["Model", "ModelName"]}}],
            ),
            Endpoint=resource(
                "AWS::SageMaker::Endpoint",
                EndpointConfigName={"Fn::GetAtt": ["Config", "EndpointConfigName"]},
            ),
        )

    changes = classify(stack("pkg-a"), stack("pkg-b"))
    config = only_change(changes, "Config")
    assert config.kind is ChangeKind.REPLACED
    assert "refers to Model" in config.reasons[0]
    endpoint = only_change(changes, "Endpoint")
    assert endpoint.kind is ChangeKind.CHANGED and not endpoint.dangerous
    assert [c.logical_id for c in changes.dangerous] == ["Model"]


def test_iam_widening_is_highlighted() -> None:
    def policy(*actions: str) -> dict[str, Any]:
        statement = {"Effect": "Allow", "Action": list(actions), "Resource": "*"}
        return resource("AWS::IAM::Policy", PolicyName="p", PolicyDocument={"Statement": [statement]})

    widened = only_change(
        classify(
            template(P=policy("ecr:GetAuthorizationToken")),
            template(P=policy("ecr:GetAuthorizationToken", "s3:*")),
        ),
        "P",
    )
    assert widened.kind is ChangeKind.CHANGED and not widened.dangerous
    assert "IAM" in widened.highlights
    assert any("widens permissions" in h and "s3:* on *" in h for h in widened.highlights)

    narrowed = only_change(
        classify(
            template(P=policy("ecr:GetAuthorizationToken", "s3:*")),
            template(P=policy("ecr:GetAuthorizationToken")),
        ),
        "P",
    )
    assert narrowed.highlights == ("IAM",)


def test_attaching_a_managed_policy_and_lifting_a_deny_are_widening() -> None:
    deny = {"Effect": "Deny", "Action": "iam:*", "Resource": "*"}
    before = resource(
        "AWS::IAM::Role", Policies=[{"PolicyName": "d", "PolicyDocument": {"Statement": [deny]}}]
    )
    after = resource("AWS::IAM::Role", ManagedPolicyArns=["arn:aws:iam::aws:policy/AdministratorAccess"])
    highlights = only_change(classify(template(R=before), template(R=after)), "R").highlights
    assert any("no longer denies iam:*" in h for h in highlights)
    assert any("attaches arn:aws:iam::aws:policy/AdministratorAccess" in h for h in highlights)


def test_intrinsic_values_read_like_fn_sub_in_highlights() -> None:
    arn = {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":iam::aws:policy/ReadOnlyAccess"]]}
    change = only_change(
        classify(template(), template(R=resource("AWS::IAM::Role", ManagedPolicyArns=[arn]))), "R"
    )
    assert change.highlights == (
        "IAM",
        "widens permissions: attaches arn:${AWS::Partition}:iam::aws:policy/ReadOnlyAccess",
    )


def test_key_policy_change_is_highlighted_as_a_resource_policy() -> None:
    def key(principal: str) -> dict[str, Any]:
        statement = {
            "Effect": "Allow",
            "Principal": {"AWS": principal},
            "Action": "kms:Decrypt",
            "Resource": "*",
        }
        return resource("AWS::KMS::Key", KeyPolicy={"Statement": [statement]})

    change = only_change(classify(template(K=key("arn:aws:iam::1:root")), template(K=key("*"))), "K")
    assert change.kind is ChangeKind.CHANGED
    assert change.highlights[0] == "resource policy"
    assert "kms:Decrypt on * to AWS:*" in change.highlights[1]


def test_security_group_opened_to_the_internet_is_highlighted() -> None:
    rule = {"IpProtocol": "tcp", "FromPort": 5000, "ToPort": 5000}
    before = resource("AWS::EC2::SecurityGroup", GroupDescription="api", SecurityGroupIngress=[])
    after = resource(
        "AWS::EC2::SecurityGroup",
        GroupDescription="api",
        SecurityGroupIngress=[{**rule, "CidrIp": "0.0.0.0/0"}],
    )
    change = only_change(classify(template(Sg=before), template(Sg=after)), "Sg")
    assert change.highlights == (
        "security group",
        "opens ingress to the internet: tcp 5000-5000 from 0.0.0.0/0",
    )


def test_ingress_from_a_referenced_cidr_is_a_security_group_change_only() -> None:
    rule = {
        "IpProtocol": "tcp",
        "FromPort": 5000,
        "ToPort": 5000,
        "CidrIp": {"Fn::GetAtt": ["Vpc", "CidrBlock"]},
    }
    before = resource("AWS::EC2::SecurityGroup", GroupDescription="api")
    after = resource("AWS::EC2::SecurityGroup", GroupDescription="api", SecurityGroupIngress=[rule])
    assert only_change(classify(template(Sg=before), template(Sg=after)), "Sg").highlights == (
        "security group",
    )


def test_added_policy_counts_as_widening() -> None:
    statement = {"Effect": "Allow", "Action": "sagemaker:InvokeEndpoint", "Resource": "*"}
    added = resource("AWS::IAM::Policy", PolicyName="p", PolicyDocument={"Statement": statement})
    change = only_change(classify(template(), template(P=added)), "P")
    assert change.kind is ChangeKind.ADDED
    assert change.highlights == ("IAM", "widens permissions: allows sagemaker:InvokeEndpoint on *")


def test_metadata_and_cdk_version_reporting_are_not_changes() -> None:
    before = template(
        Queue={**resource("AWS::SQS::Queue"), "Metadata": {"aws:cdk:path": "A/Queue"}},
        CDKMetadata={"Type": "AWS::CDK::Metadata", "Properties": {"Analytics": "v2:1"}},
    )
    after = template(
        Queue={**resource("AWS::SQS::Queue"), "Metadata": {"aws:cdk:path": "B/Queue"}},
        CDKMetadata={"Type": "AWS::CDK::Metadata", "Properties": {"Analytics": "v2:2"}},
    )
    assert classify(before, after).changes == ()


def test_deletion_policy_change_is_listed() -> None:
    before = resource("AWS::ECR::Repository", RepositoryName="r")
    after = {**resource("AWS::ECR::Repository", RepositoryName="r"), "DeletionPolicy": "Retain"}
    change = only_change(classify(template(Repo=before), template(Repo=after)), "Repo")
    assert change.kind is ChangeKind.CHANGED and change.changed == ("DeletionPolicy",)


def test_custom_resources_are_never_assumed_replaced() -> None:
    before = resource("Custom::Thing", ServiceToken="t", Value=1)
    after = resource("Custom::Thing", ServiceToken="t", Value=2)
    assert only_change(classify(template(C=before), template(C=after)), "C").kind is ChangeKind.CHANGED


def test_changes_are_ordered_by_kind_then_logical_id() -> None:
    before = template(B=resource("AWS::SQS::Queue"), Z=resource("AWS::SQS::Queue", QueueName="z"))
    after = template(A=resource("AWS::SQS::Queue"), Z=resource("AWS::SQS::Queue", QueueName="z2"))
    assert [(c.kind, c.logical_id) for c in classify(before, after).changes] == [
        (ChangeKind.ADDED, "A"),
        (ChangeKind.REPLACED, "Z"),
        (ChangeKind.REMOVED, "B"),
    ]
