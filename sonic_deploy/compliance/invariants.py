"""The project's own invariants over a variant's synthesized templates: what no rule pack says but a security
review of this project would ask. `make compliance` reports each problem as a finding (tool "invariants"),
and tests/compliance/test_invariants.py holds every variant to none."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from sonic_deploy.config.cartesia_rules import secret_name_part
from sonic_deploy.constructs.encryption import ADMINISTRATION
from sonic_deploy.constructs.findings import (
    DESTROYED_WITH_THE_STACK,
    RESOURCELESS_ACTIONS,
    SINGLE_TASK_SERVICES,
)

Templates = Mapping[str, Mapping[str, Any]]  # stack id -> template
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


def load_templates(paths: list[Path]) -> dict[str, dict[str, Any]]:
    return {path.name.split(".")[0]: json.loads(path.read_text(encoding="utf-8")) for path in paths}


def every_resource(templates: Templates) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    for stack, template in templates.items():
        for logical_id, resource in template["Resources"].items():
            yield stack, logical_id, resource


def _of_type(templates: Templates, *types: str) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    return ((s, i, r) for s, i, r in every_resource(templates) if r["Type"] in types)


def _props(resource: Mapping[str, Any]) -> dict[str, Any]:
    return dict(resource.get("Properties", {}))


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def ingress_from_anywhere(templates: Templates) -> list[str]:
    rules = [
        (s, i, rule)
        for s, i, r in _of_type(templates, "AWS::EC2::SecurityGroup")
        for rule in _props(r).get("SecurityGroupIngress", [])
    ]
    rules += [(s, i, _props(r)) for s, i, r in _of_type(templates, "AWS::EC2::SecurityGroupIngress")]
    return [
        f"{s}/{i}: ingress from anywhere"
        for s, i, rule in rules
        if rule.get("CidrIp") == "0.0.0.0/0" or rule.get("CidrIpv6") == "::/0"
    ]


def _public_subnets(template: Mapping[str, Any]) -> set[str]:
    """Subnets whose route table routes to an internet gateway."""
    resources = template["Resources"]
    igw_tables = {
        _props(r)["RouteTableId"]["Ref"]
        for r in resources.values()
        if r["Type"] == "AWS::EC2::Route" and "GatewayId" in _props(r)
    }
    return {
        _props(r)["SubnetId"]["Ref"]
        for r in resources.values()
        if r["Type"] == "AWS::EC2::SubnetRouteTableAssociation"
        and _props(r)["RouteTableId"]["Ref"] in igw_tables
    }


# An existing VPC's subnets appear by ID: network.import_vpc takes only its private ones ([network.existing_vpc]
# private_subnet_ids), so a subnet named by ID is one of those; a subnet the stack makes appears by Ref.
NAMED_SUBNET = re.compile(r'"(subnet-[0-9a-f]{8,17})"')


def _subnet_refs(value: Any) -> set[str]:
    """The stack's own subnets (by Ref) and an existing VPC's named private subnets (by ID) in `value`."""
    text = json.dumps(value)
    return set(re.findall(r'"Ref": "([A-Za-z0-9]*Subnet[A-Za-z0-9]*)"', text)) | set(
        NAMED_SUBNET.findall(text)
    )


def inference_outside_private_subnets(templates: Templates) -> list[str]:
    found, placed = [], 0
    for stack, template in templates.items():
        public = _public_subnets(template)
        for logical_id, resource in template["Resources"].items():
            kind, p, where = resource["Type"], _props(resource), f"{stack}/{logical_id}"
            if kind == "AWS::ECS::Service":
                network = p["NetworkConfiguration"]["AwsvpcConfiguration"]
                if network.get("AssignPublicIp", "DISABLED") != "DISABLED":
                    found.append(f"{where}: assigns public IPs")
                subnets = _subnet_refs(network["Subnets"])
            elif kind == "AWS::AutoScaling::AutoScalingGroup":
                subnets = _subnet_refs(p["VPCZoneIdentifier"])
            elif kind == "AWS::SageMaker::Model":
                subnets = _subnet_refs(p["VpcConfig"]["Subnets"])
            elif kind == "AWS::EKS::Nodegroup":  # the EKS route's system nodes: API server, NATS
                subnets = _subnet_refs(p["Subnets"])
            elif kind == "AWS::EKS::Cluster":  # its control plane's network interfaces
                subnets = _subnet_refs(p["ResourcesVpcConfig"]["SubnetIds"])
            elif kind == "AWS::ElasticLoadBalancingV2::LoadBalancer":
                if p["Scheme"] != "internal":
                    found.append(f"{where}: an internet-facing load balancer")
                subnets = _subnet_refs(p["Subnets"])
            else:
                continue
            if not subnets:
                found.append(f"{where}: no subnet of the stack's VPC")
            found += [f"{where} in a public subnet: {sorted(subnets & public)}"] if subnets & public else []
            placed += 1
    return found if placed else ["nothing that serves inference was found in any subnet"]


def sagemaker_models_not_isolated(templates: Templates) -> list[str]:
    """Not applicable (nothing to hold) to an environment without the SageMaker route, e.g. dev-eks; where
    the route is (dev, prod), its stack must have a model and every model network isolation."""
    models = list(_of_type(templates, "AWS::SageMaker::Model"))
    if bool(models) != ("SonicSageMaker" in templates):
        return ["a SageMaker model where, and only where, the SageMaker route is"]
    return [
        f"{s}/{i}: no network isolation"
        for s, i, r in models
        if _props(r).get("EnableNetworkIsolation") is not True
    ]


def _customer_key(value: Any) -> bool:
    """A key of this stack's (a Ref or GetAtt to a KMS key), not an AWS-managed alias."""
    return (isinstance(value, dict) and ("Ref" in value or "Fn::GetAtt" in value)) or (
        isinstance(value, str) and value.startswith("arn:") and ":key/" in value
    )


def stored_without_customer_key(templates: Templates) -> list[str]:
    unencrypted = []
    for stack, logical_id, resource in every_resource(templates):
        kind, p = resource["Type"], _props(resource)
        key = {
            "AWS::Logs::LogGroup": p.get("KmsKeyId"),
            "AWS::SNS::Topic": p.get("KmsMasterKeyId"),
            "AWS::ECR::Repository": p.get("EncryptionConfiguration", {}).get("KmsKey"),
            "AWS::SecretsManager::Secret": p.get("KmsKeyId"),
            "AWS::EFS::FileSystem": p.get("KmsKeyId") if p.get("Encrypted") else None,
        }.get(kind, True)
        if key is not True and not _customer_key(key):
            unencrypted.append(f"{stack}/{logical_id} ({kind}): not encrypted with a key of the stack's")
    return unencrypted


def gpu_hosts_without_imds_protection(templates: Templates) -> list[str]:
    hosts = list(_of_type(templates, "AWS::EC2::LaunchTemplate"))
    if bool(hosts) != ("SonicEcs" in templates):
        return ["a launch template where, and only where, ECS is"]
    found = []
    for stack, logical_id, resource in hosts:
        data = _props(resource)["LaunchTemplateData"]
        if data["MetadataOptions"]["HttpTokens"] != "required":
            found.append(f"{stack}/{logical_id}: IMDSv1 allowed")
        if "ECS_AWSVPC_BLOCK_IMDS=true" not in json.dumps(data["UserData"]):
            found.append(
                f"{stack}/{logical_id}: tasks can reach the instance metadata (no ECS_AWSVPC_BLOCK_IMDS)"
            )
    return found


def plain_text_secrets(templates: Templates) -> list[str]:
    found = []
    for stack, logical_id, resource in _of_type(templates, "AWS::ECS::TaskDefinition"):
        for container in _props(resource)["ContainerDefinitions"]:
            for variable in container.get("Environment", []):
                if secret_name_part(variable["Name"]) is not None:  # the config loader's own rule
                    found.append(
                        f"{stack}/{logical_id} {container['Name']} {variable['Name']}: a plain secret"
                    )
    for stack, template in templates.items():
        found += [
            f"{stack}: a secret value {match[:8]}..." for match in SECRET_VALUE.findall(json.dumps(template))
        ]
    return found


def fewer_than_two_on_the_callers_path(templates: Templates) -> list[str]:
    short = []
    for stack, logical_id, resource in every_resource(templates):
        kind, p = resource["Type"], _props(resource)
        single = logical_id.startswith(tuple(SINGLE_TASK_SERVICES))
        # No DesiredCount: a scalable target owns the count, and its MinCapacity is checked below.
        if kind == "AWS::ECS::Service" and p.get("DesiredCount", 2) < 2 and not single:
            short.append(f"{stack}/{logical_id}: {p['DesiredCount']} task")
        elif kind == "AWS::SageMaker::EndpointConfig":
            short += [
                f"{stack}/{logical_id}: {v['InitialInstanceCount']} instance"
                for v in p["ProductionVariants"]
                if v["InitialInstanceCount"] < 2
            ]
        elif kind == "AWS::ApplicationAutoScaling::ScalableTarget" and p["MinCapacity"] < 2 and not single:
            short.append(f"{stack}/{logical_id}: scales down to {p['MinCapacity']}")
    return short


def log_groups_kept_forever(templates: Templates) -> list[str]:
    return [
        f"{s}/{i}: no retention"
        for s, i, r in _of_type(templates, "AWS::Logs::LogGroup")
        if "RetentionInDays" not in _props(r)
    ]


def stateful_resources_lost_by_accident(templates: Templates) -> list[str]:
    return [
        f"{stack}/{logical_id} ({resource['Type']}, DeletionPolicy {resource.get('DeletionPolicy', 'Delete')})"
        for stack, logical_id, resource in every_resource(templates)
        if resource["Type"] in STATEFUL
        and resource.get("DeletionPolicy") not in RETAINED
        and not logical_id.startswith(tuple(DESTROYED_WITH_THE_STACK))
    ]


def identity_statements(templates: Templates) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for stack, logical_id, resource in every_resource(templates):
        kind, p = resource["Type"], _props(resource)
        documents = []
        if kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            documents.append(p["PolicyDocument"])
        elif kind == "AWS::IAM::Role":
            documents += [policy["PolicyDocument"] for policy in p.get("Policies", [])]
        for document in documents:
            for statement in document["Statement"]:
                yield f"{stack}/{logical_id}", statement


def wildcard_actions(templates: Templates) -> list[str]:
    return [
        f"{where}: {action}"
        for where, statement in identity_statements(templates)
        if statement["Effect"] == "Allow"
        for action in _listed(statement.get("Action", []))
        if action == "*" or action.endswith(":*")
    ]


def _held_to_the_stack(statement: Mapping[str, Any]) -> bool:
    """A Sid, and a condition that names a resource of the stack (a Ref, not of a pseudo parameter, or a
    GetAtt), e.g. ecs:cluster = this cluster."""
    condition = json.dumps(statement.get("Condition", {}))
    return bool(statement.get("Sid")) and re.search(r'"Ref": "(?!AWS::)|"Fn::GetAtt"', condition) is not None


def unexplained_wildcard_resources(templates: Templates) -> list[str]:
    """A statement on Resource `*` holds only actions that IAM cannot scope to a resource (each listed with
    its reason in sonic_deploy/constructs/findings.py), or has a Sid and a condition that holds it to a
    resource of the stack: a later grant on `*` fails here by name."""
    return [
        f"{where} ({statement.get('Sid', 'no Sid')}): {action} on *"
        for where, statement in identity_statements(templates)
        if statement["Effect"] == "Allow"
        and "*" in _listed(statement.get("Resource", []))
        and not _held_to_the_stack(statement)
        for action in _listed(statement["Action"])
        if action not in RESOURCELESS_ACTIONS
    ]


# Who must be named in the key policy of a key that encrypts a resource of each type: the service through
# which the account's principals use it (kms:ViaService), or the service principal that uses it itself.
KEY_USERS = {
    "AWS::ECR::Repository": ('"ecr.',),
    "AWS::S3::Bucket": ('"s3.',),
    "AWS::SecretsManager::Secret": ('"secretsmanager.',),
    "AWS::EFS::FileSystem": ('"elasticfilesystem.',),
    "AWS::SageMaker::EndpointConfig": ('"sagemaker.',),
    "AWS::Logs::LogGroup": ('"logs.',),
    "AWS::SNS::Topic": ('"cloudwatch.amazonaws.com"', '"sns.'),
}


def _uses_the_key_unnamed(statement: Mapping[str, Any]) -> bool:
    """An Allow to a whole account (not a service, not a named role) of an action beyond ADMINISTRATION,
    with no kms:ViaService."""
    principal = statement.get("Principal", {})
    if statement["Effect"] != "Allow" or ":root" not in json.dumps(principal.get("AWS", "")):
        return False
    beyond = [a for a in _listed(statement["Action"]) if a not in ADMINISTRATION]
    return bool(beyond) and "kms:ViaService" not in json.dumps(statement.get("Condition", {}))


def key_use_not_named(templates: Templates) -> list[str]:
    """Each stack key's policy names its users (docs/deploy.md, "The stacks' KMS keys"): the account
    administers it, and uses it only through the services that keep the stack's data with it."""
    found = []
    for stack, key_id, key in _of_type(templates, "AWS::KMS::Key"):
        statements = _props(key)["KeyPolicy"]["Statement"]
        found += [
            f"{stack}/{key_id}: {s.get('Sid', 'a statement')} lets IAM policies use the key directly"
            for s in statements
            if _uses_the_key_unnamed(s)
        ]
        named = json.dumps([[s.get("Principal"), s.get("Condition", {})] for s in statements])
        for _, logical_id, resource in every_resource({stack: templates[stack]}):
            if f'"{key_id}"' not in json.dumps(_props(resource)):
                continue
            for user in KEY_USERS.get(resource["Type"], ()):
                if user not in named:
                    shown = user.strip('"')
                    found.append(
                        f"{stack}/{key_id}: {logical_id} ({resource['Type']}) uses it, but no {shown}* is named"
                    )
    return found


INVARIANTS: dict[str, Callable[[Templates], list[str]]] = {
    "no-ingress-from-anywhere": ingress_from_anywhere,
    "inference-in-private-subnets": inference_outside_private_subnets,
    "sagemaker-network-isolation": sagemaker_models_not_isolated,
    "customer-managed-keys": stored_without_customer_key,
    "key-users-named": key_use_not_named,
    "imdsv2-and-blocked-for-tasks": gpu_hosts_without_imds_protection,
    "no-plain-text-secret": plain_text_secrets,
    "two-or-more-on-the-callers-path": fewer_than_two_on_the_callers_path,
    "log-groups-expire": log_groups_kept_forever,
    "stateful-retained-on-purpose": stateful_resources_lost_by_accident,
    "no-wildcard-action": wildcard_actions,
    "wildcard-resources-explained": unexplained_wildcard_resources,
}


def problems(templates: Templates) -> dict[str, list[str]]:
    """Each invariant's problems (an empty list: it holds)."""
    return {name: check(templates) for name, check in INVARIANTS.items()}
