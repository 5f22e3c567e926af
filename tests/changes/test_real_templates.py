"""The classifier on the stacks this app synthesizes (the session's dev templates from tests/conftest.py):
an unchanged stack has no changes, and replacing or removing any critical resource in it is caught."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from aws_cdk.assertions import Template

from sonic_deploy.changes import CRITICAL_TYPES, ChangeKind, classify
from sonic_deploy.changes.replacement import update_behaviour, value_at

ROUTES = ("sagemaker", "ecs", "eks")


@pytest.fixture(params=ROUTES)
def synthesized(request: pytest.FixtureRequest) -> dict[str, Any]:
    template: Template = request.getfixturevalue(f"{request.param}_template")
    return dict(template.to_json())


def critical_resources(template: dict[str, Any]) -> list[tuple[str, str]]:
    return sorted((k, r["Type"]) for k, r in template["Resources"].items() if r["Type"] in CRITICAL_TYPES)


def test_a_stack_compared_with_itself_has_no_changes(synthesized: dict[str, Any]) -> None:
    assert critical_resources(synthesized), "expected the stack to hold critical resources"
    assert classify(synthesized, copy.deepcopy(synthesized)).changes == ()


def test_every_critical_resource_under_a_new_logical_id_is_dangerous(synthesized: dict[str, Any]) -> None:
    for logical_id, resource_type in critical_resources(synthesized):
        renamed = copy.deepcopy(synthesized)
        renamed["Resources"][f"{logical_id}Renamed"] = renamed["Resources"].pop(logical_id)
        changes = classify(synthesized, renamed)
        assert [c.logical_id for c in changes.dangerous] == [logical_id], resource_type


def test_a_changed_create_only_property_of_a_critical_resource_fails(synthesized: dict[str, Any]) -> None:
    checked = 0
    for logical_id, resource_type in critical_resources(synthesized):
        properties = synthesized["Resources"][logical_id].get("Properties", {})
        present = [
            p for p in update_behaviour(resource_type).create_only if "*" not in p and p[0] in properties
        ]
        if not present:
            continue  # e.g. a KMS key: replaced only through a new logical ID (tested above)
        baseline = copy.deepcopy(synthesized)
        first = present[0]
        parent = value_at(baseline["Resources"][logical_id]["Properties"], first[:-1]) if first[:-1] else None
        target = parent if isinstance(parent, dict) else baseline["Resources"][logical_id]["Properties"]
        target[first[-1]] = "an-older-value"
        change = next(c for c in classify(baseline, synthesized).changes if c.logical_id == logical_id)
        assert change.kind is ChangeKind.REPLACED and change.dangerous, (logical_id, first)
        checked += 1
    assert checked, "no critical resource with a create-only property was exercised"


def test_endpoint_name_change_on_the_real_sagemaker_stack_is_caught(sagemaker_template: Template) -> None:
    synthesized = sagemaker_template.to_json()
    [(endpoint_id, _)] = sagemaker_template.find_resources("AWS::SageMaker::Endpoint").items()
    baseline = copy.deepcopy(synthesized)
    baseline["Resources"][endpoint_id]["Properties"]["EndpointName"] = "sonic-old"
    changes = classify(baseline, synthesized)
    assert [(c.logical_id, c.kind) for c in changes.dangerous] == [(endpoint_id, ChangeKind.REPLACED)]
