"""The project's own invariants, over every synthesized template of every variant: what no rule pack says
but a security review of this project would ask."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from sonic_deploy.compliance.variants import Variant
from sonic_deploy.config.rules import secret_name_part
from sonic_deploy.constructs.findings import (
    DESTROYED_WITH_THE_STACK,
    RESOURCELESS_ACTIONS,
    SINGLE_TASK_SERVICES,
)
from tests.compliance.conftest import VARIANTS, templates

Resources = dict[str, dict[str, Any]]
RETAINED = {"Retain", "RetainExceptOnCreate", "Snapshot"}
STATEFUL = {
    "AWS::KMS::Key",
    "AWS::ECR::Repository",
    "AWS::Logs::LogGroup",
    "AWS::EFS::FileSystem",
    "AWS::S3::Bucket",
    "AWS::SecretsManager::Secret",
    "AWS::Backup::BackupVault",
}
# What looks like a secret in a value: an AWS access key id, a PEM private key, a Cartesia or OpenAI key.
SECRET_VALUE = re.compile(r"AKIA[0-9A-Z]{16}|-----BEGIN [A-Z ]*PRIVATE KEY-----|\bsk[-_][A-Za-z0-9_-]{20,}")
SECRET_NAME = re.compile(
    r"(^|_)(KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIALS?|PRIVATE|AUTH)(_|$)", re.IGNORECASE
)


def every_resource(variant: Variant) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for stack, template in templates(variant).items():
        for logical_id, resource in template["Resources"].items():
            yield stack, logical_id, resource


def of_type(variant: Variant, *types: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    return ((s, i, r) for s, i, r in every_resource(variant) if r["Type"] in types)


def props(resource: dict[str, Any]) -> dict[str, Any]:
    return dict(resource.get("Properties", {}))


parametrized = pytest.mark.parametrize("variant", VARIANTS, ids=lambda variant: variant.slug)


@parametrized
def test_no_ingress_from_anywhere(variant: Variant) -> None:
    rules = [
        (s, i, rule)
        for s, i, r in of_type(variant, "AWS::EC2::SecurityGroup")
        for rule in props(r).get("SecurityGroupIngress", [])
    ]
    rules += [(s, i, props(r)) for s, i, r in of_type(variant, "AWS::EC2::SecurityGroupIngress")]
    open_to_all = [
        f"{s}/{i}"
        for s, i, rule in rules
        if rule.get("CidrIp") == "0.0.0.0/0" or rule.get("CidrIpv6") == "::/0"
    ]
    assert open_to_all == []


def _public_subnets(template: dict[str, Any]) -> set[str]:
    """Subnets whose route table routes to an internet gateway."""
    resources: Resources = template["Resources"]
    igw_tables = {
        props(r)["RouteTableId"]["Ref"]
        for r in resources.values()
        if r["Type"] == "AWS::EC2::Route" and "GatewayId" in props(r)
    }
    return {
        props(r)["SubnetId"]["Ref"]
        for r in resources.values()
        if r["Type"] == "AWS::EC2::SubnetRouteTableAssociation"
        and props(r)["RouteTableId"]["Ref"] in igw_tables
    }


def _subnet_refs(value: Any) -> set[str]:
    text = json.dumps(value)
    return set(re.findall(r'"Ref": "([A-Za-z0-9]*Subnet[A-Za-z0-9]*)"', text))


@parametrized
def test_inference_runs_only_in_private_subnets(variant: Variant) -> None:
    placed = 0
    for stack, template in templates(variant).items():
        public = _public_subnets(template)
        for logical_id, resource in template["Resources"].items():
            kind, p = resource["Type"], props(resource)
            if kind == "AWS::ECS::Service":
                network = p["NetworkConfiguration"]["AwsvpcConfiguration"]
                assert network.get("AssignPublicIp", "DISABLED") == "DISABLED", f"{stack}/{logical_id}"
                subnets = _subnet_refs(network["Subnets"])
            elif kind == "AWS::AutoScaling::AutoScalingGroup":
                subnets = _subnet_refs(p["VPCZoneIdentifier"])
            elif kind == "AWS::SageMaker::Model":
                subnets = _subnet_refs(p["VpcConfig"]["Subnets"])
            elif kind == "AWS::ElasticLoadBalancingV2::LoadBalancer":
                assert p["Scheme"] == "internal", f"{stack}/{logical_id}"
                subnets = _subnet_refs(p["Subnets"])
            else:
                continue
            assert subnets, f"{stack}/{logical_id}: no subnet of the stack's VPC"
            assert subnets.isdisjoint(public), f"{stack}/{logical_id} in a public subnet: {subnets & public}"
            placed += 1
    assert placed > 0


@parametrized
def test_sagemaker_models_are_network_isolated(variant: Variant) -> None:
    models = list(of_type(variant, "AWS::SageMaker::Model"))
    assert models, "every variant deploys the SageMaker route"
    assert all(props(r).get("EnableNetworkIsolation") is True for _, _, r in models)


def _customer_key(value: Any) -> bool:
    """A key of this stack's (a Ref or GetAtt to a KMS key), not an AWS-managed alias."""
    return (isinstance(value, dict) and ("Ref" in value or "Fn::GetAtt" in value)) or (
        isinstance(value, str) and value.startswith("arn:") and ":key/" in value
    )


@parametrized
def test_customer_managed_keys_encrypt_what_is_stored(variant: Variant) -> None:
    unencrypted = []
    for stack, logical_id, resource in every_resource(variant):
        kind, p = resource["Type"], props(resource)
        key = {
            "AWS::Logs::LogGroup": p.get("KmsKeyId"),
            "AWS::SNS::Topic": p.get("KmsMasterKeyId"),
            "AWS::ECR::Repository": p.get("EncryptionConfiguration", {}).get("KmsKey"),
            "AWS::SecretsManager::Secret": p.get("KmsKeyId"),
            "AWS::EFS::FileSystem": p.get("KmsKeyId") if p.get("Encrypted") else None,
        }.get(kind, True)
        if key is not True and not _customer_key(key):
            unencrypted.append(f"{stack}/{logical_id} ({kind})")
    assert unencrypted == []


@parametrized
def test_gpu_hosts_require_imdsv2_and_block_it_for_tasks(variant: Variant) -> None:
    hosts = list(of_type(variant, "AWS::EC2::LaunchTemplate"))
    assert bool(hosts) == ("SonicEcs" in templates(variant)), (
        "a launch template where, and only where, ECS is"
    )
    for stack, logical_id, resource in hosts:
        data = props(resource)["LaunchTemplateData"]
        assert data["MetadataOptions"]["HttpTokens"] == "required", f"{stack}/{logical_id}"
        assert "ECS_AWSVPC_BLOCK_IMDS=true" in json.dumps(data["UserData"]), f"{stack}/{logical_id}"


@parametrized
def test_no_plain_text_secret(variant: Variant) -> None:
    found = []
    for stack, logical_id, resource in of_type(variant, "AWS::ECS::TaskDefinition"):
        for container in props(resource)["ContainerDefinitions"]:
            for variable in container.get("Environment", []):
                if secret_name_part(variable["Name"]) is not None:  # the config loader's own rule
                    found.append(f"{stack}/{logical_id} {container['Name']} {variable['Name']}")
    for stack, template in templates(variant).items():
        found += [f"{stack}: {match}" for match in SECRET_VALUE.findall(json.dumps(template))]
    assert found == []


@parametrized
def test_two_or_more_of_everything_on_the_callers_path(variant: Variant) -> None:
    short = []
    for stack, logical_id, resource in every_resource(variant):
        kind, p = resource["Type"], props(resource)
        # No DesiredCount: a scalable target owns the count, and its MinCapacity is checked below.
        if kind == "AWS::ECS::Service" and p.get("DesiredCount", 2) < 2:
            if not any(logical_id.startswith(service) for service in SINGLE_TASK_SERVICES):
                short.append(f"{stack}/{logical_id}: {p['DesiredCount']} task")
        elif kind == "AWS::SageMaker::EndpointConfig":
            short += [
                f"{stack}/{logical_id}: {v['InitialInstanceCount']} instance"
                for v in p["ProductionVariants"]
                if v["InitialInstanceCount"] < 2
            ]
        elif (
            kind == "AWS::ApplicationAutoScaling::ScalableTarget"
            and p["MinCapacity"] < 2
            and not logical_id.startswith(tuple(SINGLE_TASK_SERVICES))
        ):
            short.append(f"{stack}/{logical_id}: scales down to {p['MinCapacity']}")
    assert short == []


@parametrized
def test_every_log_group_expires(variant: Variant) -> None:
    forever = [
        f"{s}/{i}" for s, i, r in of_type(variant, "AWS::Logs::LogGroup") if "RetentionInDays" not in props(r)
    ]
    assert forever == []


@parametrized
def test_stateful_resources_are_retained_or_destroyed_on_purpose(variant: Variant) -> None:
    lost = [
        f"{stack}/{logical_id} ({resource['Type']}, DeletionPolicy {resource.get('DeletionPolicy', 'Delete')})"
        for stack, logical_id, resource in every_resource(variant)
        if resource["Type"] in STATEFUL
        and resource.get("DeletionPolicy") not in RETAINED
        and not any(logical_id.startswith(prefix) for prefix in DESTROYED_WITH_THE_STACK)
    ]
    assert lost == []


def _identity_statements(variant: Variant) -> Iterator[tuple[str, dict[str, Any]]]:
    for stack, logical_id, resource in every_resource(variant):
        kind, p = resource["Type"], props(resource)
        documents = []
        if kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            documents.append(p["PolicyDocument"])
        elif kind == "AWS::IAM::Role":
            documents += [policy["PolicyDocument"] for policy in p.get("Policies", [])]
        for document in documents:
            for statement in document["Statement"]:
                yield f"{stack}/{logical_id}", statement


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@parametrized
def test_no_wildcard_action(variant: Variant) -> None:
    wild = [
        f"{where}: {action}"
        for where, statement in _identity_statements(variant)
        if statement["Effect"] == "Allow"
        for action in _listed(statement.get("Action", []))
        if action == "*" or action.endswith(":*")
    ]
    assert wild == []


def _held_to_the_stack(statement: dict[str, Any]) -> bool:
    """A Sid, and a condition that names a resource of the stack (a Ref, not of a pseudo parameter, or a
    GetAtt), e.g. ecs:cluster = this cluster."""
    condition = json.dumps(statement.get("Condition", {}))
    return bool(statement.get("Sid")) and re.search(r'"Ref": "(?!AWS::)|"Fn::GetAtt"', condition) is not None


@parametrized
def test_every_wildcard_resource_is_explained(variant: Variant) -> None:
    """A statement on Resource `*` holds only actions that IAM cannot scope to a resource (each listed with
    its reason in sonic_deploy/constructs/findings.py), or has a Sid and a condition that holds it to a
    resource of the stack: a later grant on `*` fails here by name."""
    unexplained = [
        f"{where} ({statement.get('Sid', 'no Sid')}): {action}"
        for where, statement in _identity_statements(variant)
        if statement["Effect"] == "Allow"
        and "*" in _listed(statement.get("Resource", []))
        and not _held_to_the_stack(statement)
        for action in _listed(statement["Action"])
        if action not in RESOURCELESS_ACTIONS
    ]
    assert unexplained == []
