"""The EKS stack as a whole, both ways in: a cluster the stack makes (dev-eks as shipped) and one named in
config. Snapshots, outputs, warnings, and what only the whole stack shows."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack
from aws_cdk.assertions import Annotations, Match, Template
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from sonic_deploy.routes import ROUTES
from sonic_deploy.routes.eks import outputs
from sonic_deploy.routes.eks.constructs.cluster import ADMIN_POLICY
from sonic_deploy.routes.eks.preflight_cluster import CONTROLLER_ACCOUNTS, WORKLOAD_ACCOUNTS
from tests.conftest import EKS_ENV, EditConfig, rendered, resources_of, synthesize_from, synthesized
from tests.snapshot import scrubbed


def test_snapshot_new_cluster(eks_template: Template, snapshot: SnapshotAssertion) -> None:
    assert scrubbed(eks_template.to_json()) == snapshot(extension_class=JSONSnapshotExtension)


def test_snapshot_existing_cluster(eks_existing: Template, snapshot: SnapshotAssertion) -> None:
    assert scrubbed(eks_existing.to_json()) == snapshot(extension_class=JSONSnapshotExtension)


def test_no_errors_and_no_warnings_but_the_placeholders(eks_stack: Stack) -> None:
    settings = synthesized(EKS_ENV)[0]
    annotations = Annotations.from_stack(eks_stack)
    assert annotations.find_error("*", Match.any_value()) == []
    warnings = [str(w.entry.data) for w in annotations.find_warning("*", Match.any_value())]
    expected = [
        f"placeholder: {p} [ack: sonic-deploy:placeholder:{p.field}]" for p in settings.placeholders["eks"]
    ]
    plain = [w for w in warnings if w.startswith("plain TCP listener")]
    assert expected and len(plain) == 1 and [w for w in warnings if w not in plain] == expected


def test_every_output_the_tools_read_is_written_both_ways(
    eks_template: Template, eks_existing: Template
) -> None:
    declared = {value for name, value in vars(outputs).items() if name.isupper() and isinstance(value, str)}
    for template in (eks_template, eks_existing):
        written = set(template.to_json()["Outputs"])
        assert declared <= written
        assert set(ROUTES["eks"].connect_outputs) | set(ROUTES["eks"].probe_outputs) <= written
    assert eks_existing.to_json()["Outputs"][outputs.CLUSTER_NAME]["Value"] == "my-cluster"


def test_a_new_cluster_is_private_logged_encrypted_and_at_the_configured_version(
    eks_template: Template,
) -> None:
    (cluster,) = resources_of(eks_template, "AWS::EKS::Cluster").values()
    config = _props(cluster)
    assert config["Version"] == "1.36"
    assert config["ResourcesVpcConfig"]["EndpointPrivateAccess"] is True
    assert config["ResourcesVpcConfig"]["EndpointPublicAccess"] is False
    assert len(config["Logging"]["ClusterLogging"]["EnabledTypes"]) == 5
    assert "KeyArn" in str(config["EncryptionConfig"])
    (nodegroup,) = resources_of(eks_template, "AWS::EKS::Nodegroup").values()
    assert _props(nodegroup)["Labels"] == {"sonic-deploy/nodes": "system"}
    assert len(_props(nodegroup)["Subnets"]) == 1  # the route's one AZ
    eks_template.has_resource_properties("AWS::EKS::Addon", {"AddonName": "eks-pod-identity-agent"})


def test_an_existing_cluster_is_used_not_made_and_its_kubectl_lambda_is_admitted(
    eks_existing: Template,
) -> None:
    assert resources_of(eks_existing, "AWS::EKS::Cluster") == {}
    # Its own system nodes, as a new cluster's: the controllers and the CPU pods select them.
    (nodegroup,) = resources_of(eks_existing, "AWS::EKS::Nodegroup").values()
    assert _props(nodegroup)["ClusterName"] == "my-cluster"
    assert _props(nodegroup)["Labels"] == {"sonic-deploy/nodes": "system"}
    assert resources_of(eks_existing, "AWS::EC2::VPC") == {}
    entries = resources_of(eks_existing, "AWS::EKS::AccessEntry")
    assert {_props(e)["ClusterName"] for e in entries.values()} == {"my-cluster"}  # the kubectl's, the nodes'
    (entry,) = [e for e in entries.values() if "ClusterKubectlRole" in str(_props(e)["PrincipalArn"])]
    (policy,) = _props(entry)["AccessPolicies"]
    assert policy["AccessScope"] == {"Type": "cluster"} and rendered(policy["PolicyArn"]).endswith(
        ADMIN_POLICY
    )
    eks_existing.has_resource_properties(
        "AWS::EC2::SecurityGroupIngress",
        {"GroupId": "sg-0123456789abcdef0", "FromPort": 443, "ToPort": 443},
    )


def test_workloads_and_controllers_get_their_roles_by_pod_identity_as_preflight_knows(
    eks_template: Template,
) -> None:
    """Preflight refuses a cluster that already associates one of these (preflight_cluster.py)."""
    associations = resources_of(eks_template, "AWS::EKS::PodIdentityAssociation").values()
    accounts = {(_props(a)["Namespace"], _props(a)["ServiceAccount"]) for a in associations}
    assert accounts == {*CONTROLLER_ACCOUNTS, *(("sonic", account) for account in WORKLOAD_ACCOUNTS)}


def _props(resource: dict[str, Any]) -> dict[str, Any]:
    props: dict[str, Any] = resource["Properties"]
    return props


def test_operators_named_in_admins_get_cluster_admin_entries(edit_config: EditConfig) -> None:
    admins = 'admins = ["arn:aws:iam::123456789012:role/platform-admin"]'
    config = edit_config(f"environments/{EKS_ENV}.toml", f"# {admins}", admins)
    template = Template.from_stack(synthesize_from(config, EKS_ENV, routes=["eks"])["eks"])
    entries = [_props(e) for e in resources_of(template, "AWS::EKS::AccessEntry").values()]
    (admin,) = [e for e in entries if e["PrincipalArn"] == "arn:aws:iam::123456789012:role/platform-admin"]
    (policy,) = admin["AccessPolicies"]
    assert policy["AccessScope"] == {"Type": "cluster"} and rendered(policy["PolicyArn"]).endswith(
        ADMIN_POLICY
    )
