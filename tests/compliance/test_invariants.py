"""The project's own invariants (sonic_deploy/compliance/invariants.py, run by `make compliance` too), over
every synthesized template of every variant: what no rule pack says but a security review of this project
would ask. Each is also shown to fail on a template that breaks it."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from sonic_deploy.compliance.invariants import INVARIANTS, problems
from sonic_deploy.compliance.variants import BRANCHES, Variant
from tests.compliance.conftest import VARIANTS, templates


@pytest.mark.parametrize("name", list(INVARIANTS))
@pytest.mark.parametrize("variant", [*VARIANTS, BRANCHES], ids=lambda variant: variant.slug)
def test_the_invariant_holds(variant: Variant, name: str) -> None:
    assert INVARIANTS[name](templates(variant)) == []


def dev() -> dict[str, dict[str, Any]]:
    return copy.deepcopy(templates(VARIANTS[0]))


def first(body: dict[str, Any], resource_type: str) -> dict[str, Any]:
    return next(r for r in body["Resources"].values() if r["Type"] == resource_type)


def broken(mutated: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    return {name: found for name, found in problems(mutated).items() if found}


def test_a_role_reading_every_log_group_breaks_an_invariant() -> None:
    mutated = dev()
    policy = first(mutated["SonicEcs"], "AWS::IAM::Policy")["Properties"]["PolicyDocument"]
    policy["Statement"].append({"Effect": "Allow", "Action": "logs:GetLogEvents", "Resource": "*"})
    assert list(broken(mutated)) == ["wildcard-resources-explained"]


def test_tasks_reaching_the_instance_metadata_breaks_an_invariant() -> None:
    mutated = dev()
    [(logical_id, host)] = [
        (i, r) for i, r in mutated["SonicEcs"]["Resources"].items() if r["Type"] == "AWS::EC2::LaunchTemplate"
    ]
    data = host["Properties"]["LaunchTemplateData"]
    data["UserData"] = json.loads(json.dumps(data["UserData"]).replace("ECS_AWSVPC_BLOCK_IMDS=true", ""))
    assert broken(mutated) == {
        "imdsv2-and-blocked-for-tasks": [
            f"SonicEcs/{logical_id}: tasks can reach the instance metadata (no ECS_AWSVPC_BLOCK_IMDS)"
        ]
    }


def test_a_log_group_kept_forever_and_a_wildcard_action_break_invariants() -> None:
    mutated = dev()
    del first(mutated["SonicSageMaker"], "AWS::Logs::LogGroup")["Properties"]["RetentionInDays"]
    policy = first(mutated["SonicSageMaker"], "AWS::IAM::Policy")["Properties"]["PolicyDocument"]
    policy["Statement"].append({"Effect": "Allow", "Action": "s3:*", "Resource": "arn:aws:s3:::x"})
    assert set(broken(mutated)) == {"log-groups-expire", "no-wildcard-action"}


def _ecs_key_without(mutated: dict[str, dict[str, Any]], sid: str) -> tuple[str, list[dict[str, Any]]]:
    """The ECS stack's key's id and its policy's statements, less the one named `sid`."""
    key_id, key = next(
        (i, r) for i, r in mutated["SonicEcs"]["Resources"].items() if r["Type"] == "AWS::KMS::Key"
    )
    statements = key["Properties"]["KeyPolicy"]["Statement"]
    statements[:] = [s for s in statements if s.get("Sid") != sid]
    return key_id, statements


def test_a_key_any_iam_policy_may_use_and_an_unnamed_service_break_an_invariant() -> None:
    mutated = dev()
    key_id, statements = _ecs_key_without(mutated, "UseThroughEcr")
    statements.append(
        {"Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::210987654321:root"}, "Action": "kms:*"}
    )
    assert list(broken(mutated)) == ["key-users-named"]
    found = broken(mutated)["key-users-named"]
    assert found[0] == f"SonicEcs/{key_id}: a statement lets IAM policies use the key directly"
    assert any("(AWS::ECR::Repository) uses it, but no ecr.* is named" in line for line in found[1:])


def test_a_topic_whose_publishers_cannot_encrypt_breaks_an_invariant() -> None:
    mutated = dev()
    key_id, _ = _ecs_key_without(mutated, "UseThroughSns")
    [(topic_id, _)] = [
        (i, r) for i, r in mutated["SonicEcs"]["Resources"].items() if r["Type"] == "AWS::SNS::Topic"
    ]
    assert broken(mutated) == {
        "key-users-named": [f"SonicEcs/{key_id}: {topic_id} (AWS::SNS::Topic) uses it, but no sns.* is named"]
    }


def test_the_sagemaker_invariant_does_not_apply_without_the_route_but_holds_the_route_to_its_model() -> None:
    """dev-eks has no SageMaker route: nothing to isolate, so no problem; a SageMaker stack with no model is
    one (the invariant would otherwise pass on a model that disappeared)."""
    without_the_route = dev()
    del without_the_route["SonicSageMaker"]
    assert broken(without_the_route) == {}
    without_a_model = dev()
    resources = without_a_model["SonicSageMaker"]["Resources"]
    [model_id] = [i for i, r in resources.items() if r["Type"] == "AWS::SageMaker::Model"]
    del resources[model_id]
    assert broken(without_a_model) == {
        "sagemaker-network-isolation": ["a SageMaker model where, and only where, the SageMaker route is"]
    }


def test_eks_system_nodes_in_a_public_subnet_break_an_invariant() -> None:
    eks = next(variant for variant in VARIANTS if variant.environment == "dev-eks" and not variant.closed)
    mutated = copy.deepcopy(templates(eks))
    resources = mutated["SonicEks"]["Resources"]
    (public,) = [
        logical
        for logical, r in resources.items()
        if r["Type"] == "AWS::EC2::Subnet" and "Public" in logical and "1" in logical
    ]
    [(logical_id, nodes)] = [(i, r) for i, r in resources.items() if r["Type"] == "AWS::EKS::Nodegroup"]
    nodes["Properties"]["Subnets"] = [{"Ref": public}]
    assert broken(mutated) == {
        "inference-in-private-subnets": [f"SonicEks/{logical_id} in a public subnet: ['{public}']"]
    }


def test_an_existing_vpcs_named_private_subnets_hold_inference_and_no_subnet_breaks_an_invariant() -> None:
    """On an existing VPC ([network.existing_vpc]) the stack names its private subnets by ID, not by Ref."""
    existing = next(variant for variant in VARIANTS if variant.slug == "dev-eks-existing")
    mutated = copy.deepcopy(templates(existing))
    [(logical_id, nodes)] = [
        (i, r) for i, r in mutated["SonicEks"]["Resources"].items() if r["Type"] == "AWS::EKS::Nodegroup"
    ]
    assert nodes["Properties"]["Subnets"] == ["subnet-0123456789abcdef0"]
    assert broken(mutated) == {}
    nodes["Properties"]["Subnets"] = []
    assert broken(mutated) == {
        "inference-in-private-subnets": [f"SonicEks/{logical_id}: no subnet of the stack's VPC"]
    }
