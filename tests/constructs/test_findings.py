"""Acknowledgements sit on the resource they concern: no compliance-pack rule is acknowledged for a whole
stack, and each inline IAM policy carries its own IAMNoInlinePolicy reason."""

from __future__ import annotations

from aws_cdk import CfnResource, Stack
from constructs import IConstruct

from sonic_deploy.constructs.findings import COMPLIANCE_PACKS
from tests.conftest import synthesized


def _acknowledged(construct: IConstruct) -> dict[str, str]:
    return {
        rule: reason
        for entry in construct.node.metadata
        if entry.type == "aws:cdk:acknowledged-rules"
        for rule, reason in entry.data.items()
    }


def _stacks() -> list[Stack]:
    """dev's two routes and prod's SageMaker route (its canary's role)."""
    return [*synthesized("dev")[1].values(), *synthesized("prod")[1].values()]


def test_no_compliance_rule_is_acknowledged_for_a_whole_stack() -> None:
    packs = tuple(f"{pack}::" for pack in COMPLIANCE_PACKS)
    for stack in _stacks():
        assert [rule for rule in _acknowledged(stack) if rule.startswith(packs)] == [], stack.node.path


def test_each_inline_policy_is_acknowledged_on_itself_or_its_own_construct() -> None:
    """On the policy, its role, or a construct of the stack's that holds them: never the stack itself."""
    policies = 0
    for stack in _stacks():
        for resource in stack.node.find_all():
            if not isinstance(resource, CfnResource) or resource.cfn_resource_type != "AWS::IAM::Policy":
                continue
            policies += 1
            rules = {
                rule.split("::")[0]
                for scope in resource.node.scopes
                if not isinstance(scope, Stack)
                for rule in _acknowledged(scope)
                if rule.endswith("-IAMNoInlinePolicy")
            }
            assert rules == set(COMPLIANCE_PACKS), resource.node.path
    assert policies >= 15  # dev's 15 and prod's canary role at least
