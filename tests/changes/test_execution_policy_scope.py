"""How far config/bootstrap/cloudformation-execution-policy.json reaches, and the permissions boundary
(config/bootstrap/permissions-boundary.json) on every role the stacks create: no service granted whole on
`*`, every grant on `*` either takes no resource or is reasoned in sonic_deploy/changes/bootstrap_scope.py,
roles created only with the boundary, and the execution role and the bootstrap's own policies out of reach.

What IAM can scope comes from cfn-lint's copy of the Service Authorization Reference (Policies.json: each
action's resource types; none means `*` only)."""

from __future__ import annotations

import fnmatch
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import cfnlint  # type: ignore[import-untyped]
import pytest

from sonic_deploy.changes.bootstrap_scope import (
    TYPE_WIDE_STATEMENTS,
    WHOLE_SERVICES_ON_EVERYTHING,
    WILDCARD_RESOURCE_ACTIONS,
)
from sonic_deploy.changes.execution_policy import POLICY_NAME, part_name
from sonic_deploy.config.bootstrap import PERMISSIONS_BOUNDARY_NAME
from tests.changes.test_execution_policy import (
    POLICY,
    handler_permissions,
    listed,
    not_needed,
    resource_types,
    templates,
)

REPO = Path(__file__).resolve().parents[2]
BOUNDARY = json.loads((REPO / "config/bootstrap/permissions-boundary.json").read_text())
IAM_ACTIONS = json.loads(
    (Path(cfnlint.__file__).parent / "data/AdditionalSpecs/Policies.json").read_text(encoding="utf-8")
)
ACCOUNT, REGION = "210987654321", "us-east-2"
EXECUTION_ROLE = f"arn:aws:iam::{ACCOUNT}:role/cdk-hnb659fds-cfn-exec-role-{ACCOUNT}-{REGION}"
BOUNDARY_ARN = f"arn:aws:iam::{ACCOUNT}:policy/{PERMISSIONS_BOUNDARY_NAME}"
# What the AWS managed policies the stacks attach allow and the roles use (AWS Managed Policy Reference Guide,
# CloudWatchAgentServerPolicy, AWSLambdaBasicExecutionRole; for the EKS route AmazonEKSWorkerNodePolicy, whose
# eks-auth:AssumeRoleForPodIdentity the Pod Identity Agent calls with the node's role, AmazonEKS_CNI_Policy,
# AWSLambdaVPCAccessExecutionRole and the ECR read policies): the boundary must leave them whole. Left cut on
# purpose: what AmazonEKSClusterPolicy grants for load balancers the cluster would make itself (the stack makes
# its own NLB) and iam:CreateServiceLinkedRole.
MANAGED_POLICY_ACTIONS = {
    "eks:DescribeCluster",
    "eks-auth:AssumeRoleForPodIdentity",
    "ec2:AssignPrivateIpAddresses",
    "ec2:CreateNetworkInterface",
    "ec2:DescribeInstances",
    "ecr:BatchGetImage",
    "ecr:GetAuthorizationToken",
    "ecr-public:GetAuthorizationToken",
    "sts:GetServiceBearerToken",
    "cloudwatch:PutMetricData",
    "ec2:DescribeVolumes",
    "ec2:DescribeTags",
    "logs:PutLogEvents",
    "logs:PutRetentionPolicy",
    "logs:DescribeLogStreams",
    "logs:DescribeLogGroups",
    "logs:CreateLogStream",
    "logs:CreateLogGroup",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
    "xray:GetSamplingStatisticSummaries",
    "ssm:GetParameter",
}

__all__ = ["templates"]  # the module-scoped fixture, shared


def allowed() -> list[dict[str, Any]]:
    return [s for s in POLICY["Statement"] if s["Effect"] == "Allow"]


def denied() -> list[dict[str, Any]]:
    return [s for s in POLICY["Statement"] if s["Effect"] == "Deny"]


@cache
def matching_actions(pattern: str) -> dict[str, list[str]]:
    """Each IAM action a pattern (`ec2:Describe*`) covers, with the resource types IAM scopes it to."""
    service, name = pattern.lower().split(":")
    actions = IAM_ACTIONS.get(service, {}).get("Actions", {})
    return {
        f"{service}:{action}": list(spec.get("Resources", []))
        for action, spec in actions.items()
        if fnmatch.fnmatchcase(action, name)
    }


def matches(value: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(value.lower(), p.lower()) for p in patterns)


def granted_on(action: str, resource: str, statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        s
        for s in statements
        if matches(action, listed(s["Action"]))
        and any(fnmatch.fnmatchcase(resource, r) for r in listed(s["Resource"]))
    ]


def test_no_service_is_granted_whole_on_everything() -> None:
    for statement in allowed():
        if "*" not in listed(statement["Resource"]):
            continue
        for action in listed(statement["Action"]):
            service, name = action.split(":")
            assert name != "*" or service in WHOLE_SERVICES_ON_EVERYTHING, (statement["Sid"], action)


def test_every_action_on_everything_takes_no_resource_or_is_reasoned() -> None:
    for statement in allowed():
        if "*" not in listed(statement["Resource"]) or statement["Sid"] in TYPE_WIDE_STATEMENTS:
            continue
        for action in listed(statement["Action"]):
            found = matching_actions(action)
            assert found, f"{action}: not an IAM action"
            scoped = sorted(a for a, types in found.items() if types)
            assert not scoped or action in WILDCARD_RESOURCE_ACTIONS, (
                f"{statement['Sid']}: {action} on * although IAM scopes {scoped[:3]} to a resource: grant it on "
                "the stacks' resource names, or give the reason in sonic_deploy/changes/bootstrap_scope.py"
            )


def test_every_other_grant_names_the_stacks_resources() -> None:
    for statement in allowed():
        if statement["Sid"] in TYPE_WIDE_STATEMENTS or "*" in listed(statement["Resource"]):
            continue
        for resource in listed(statement["Resource"]):
            name = resource.split(":", 5)[5]
            assert (
                "sonic" in name.lower()
                or name.startswith(
                    ("aws-service-role/", "parameter/cdk-bootstrap/", "parameter/aws/service/")
                )
                # CloudFormation names an SSM parameter CFN-<logical id>-<random>: the EKS stack's one only.
                or name.startswith("parameter/CFN-ClusterKubectlReadyBarrier")
                or ("cdk-" in name)
            ), f"{statement['Sid']}: {resource}"


def test_every_reason_is_used() -> None:
    sids = {s["Sid"] for s in POLICY["Statement"]}
    assert set(TYPE_WIDE_STATEMENTS) <= sids
    on_everything = {a for s in allowed() if "*" in listed(s["Resource"]) for a in listed(s["Action"])}
    assert set(WILDCARD_RESOURCE_ACTIONS) <= on_everything


def test_what_iam_cannot_scope_is_granted_on_everything(templates: dict[str, dict[str, Any]]) -> None:
    """A handler permission that takes no resource matches no scoped statement: granted on `*`, or the
    deploy fails with AccessDenied."""
    missing = set()
    for resource_type in resource_types(templates):
        if resource_type.startswith("Custom::"):
            continue
        for permission in handler_permissions(resource_type):
            found = matching_actions(permission)
            if not_needed(permission) or not found or any(types for types in found.values()):
                continue
            if not granted_on(permission, "*", allowed()):
                missing.add(f"{permission} ({resource_type})")
    assert not missing, sorted(missing)


def test_roles_are_created_only_with_the_boundary() -> None:
    for action in ("iam:CreateRole", "iam:PutRolePermissionsBoundary"):
        [statement] = granted_on(action, f"arn:aws:iam::{ACCOUNT}:role/sonic-dev-ecs-TaskRole", allowed())
        condition = statement["Condition"]["ArnLike"]["iam:PermissionsBoundary"]
        assert fnmatch.fnmatchcase(BOUNDARY_ARN, condition), action
        assert not fnmatch.fnmatchcase(f"arn:aws:iam::{ACCOUNT}:policy/sonic-other", condition)
    assert granted_on("iam:DeleteRolePermissionsBoundary", "*", denied())
    assert not granted_on("iam:DeleteRolePermissionsBoundary", "arn:aws:iam::1:role/sonic-x", allowed())


@pytest.mark.parametrize(
    "resource",
    [
        EXECUTION_ROLE,
        BOUNDARY_ARN,
        *(f"arn:aws:iam::{ACCOUNT}:policy/{part_name(index)}" for index in range(3)),
    ],
)
def test_the_execution_role_and_the_bootstrap_policies_are_out_of_reach(resource: str) -> None:
    for action in (
        "iam:PutRolePolicy",
        "iam:AttachRolePolicy",
        "iam:CreatePolicyVersion",
        "iam:DeletePolicy",
    ):
        assert granted_on(action, resource, denied()), (action, resource)


def test_neither_bootstrap_policy_can_be_attached_to_a_role_of_the_stacks() -> None:
    [deny] = granted_on("iam:AttachRolePolicy", f"arn:aws:iam::{ACCOUNT}:role/sonic-dev-ecs-X", denied())
    refused = deny["Condition"]["ArnLike"]["iam:PolicyARN"]
    for name in (POLICY_NAME, part_name(1), PERMISSIONS_BOUNDARY_NAME):
        assert matches(f"arn:aws:iam::{ACCOUNT}:policy/{name}", refused), name


def roles(templates: dict[str, dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (stack, logical_id, resource.get("Properties", {}))
        for stack, body in templates.items()
        for logical_id, resource in body["Resources"].items()
        if resource["Type"] == "AWS::IAM::Role"
    ]


def test_every_role_of_every_variant_carries_the_boundary(templates: dict[str, dict[str, Any]]) -> None:
    found = roles(templates)
    assert any("Provider" in logical_id for _, logical_id, _ in found)  # CDK's own provider roles too
    for stack, logical_id, properties in found:
        boundary = json.dumps(properties.get("PermissionsBoundary"))
        assert re.search(rf':policy/{PERMISSIONS_BOUNDARY_NAME}"(\]\]\}})?$', boundary), (stack, logical_id)


def role_actions(templates: dict[str, dict[str, Any]]) -> set[str]:
    actions = set(MANAGED_POLICY_ACTIONS)
    for body in templates.values():
        for resource in body["Resources"].values():
            properties = resource.get("Properties", {})
            documents = []
            if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
                documents.append(properties["PolicyDocument"])
            elif resource["Type"] == "AWS::IAM::Role":
                documents += [p["PolicyDocument"] for p in properties.get("Policies", [])]
            for document in documents:
                for statement in document["Statement"]:
                    assert "NotAction" not in statement
                    if statement["Effect"] == "Allow":
                        actions.update(listed(statement["Action"]))
    return actions


def test_the_boundary_leaves_every_role_what_its_policies_grant(templates: dict[str, dict[str, Any]]) -> None:
    boundary_allows = [
        a for s in BOUNDARY["Statement"] if s["Effect"] == "Allow" for a in listed(s["Action"])
    ]
    cut = sorted(a for a in role_actions(templates) if not matches(a, boundary_allows))
    assert not cut, f"config/bootstrap/permissions-boundary.json would cut {cut}"


# Karpenter's controller reads and lists instance profiles (its node class's finalizer and garbage collector,
# outside an isolated VPC); it makes none: the EC2NodeClass names the stack's (routes/eks/constructs/
# karpenter_policy.py). No role may change IAM.
INSTANCE_PROFILE_READS = {"iam:GetInstanceProfile", "iam:ListInstanceProfiles"}


def test_the_boundary_lets_no_role_change_iam() -> None:
    allows = [s for s in BOUNDARY["Statement"] if s["Effect"] == "Allow"]
    iam_grants = [
        (a, s["Resource"]) for s in allows for a in listed(s["Action"]) if a.startswith(("iam:", "*"))
    ]
    reads = [(a, r) for a, r in iam_grants if a in INSTANCE_PROFILE_READS]
    assert [g for g in iam_grants if g not in reads] == [("iam:PassRole", "arn:*:iam::*:role/sonic-*")]
    assert {r for _, r in reads} == {"arn:*:iam::*:instance-profile/*"}
    for action in ("iam:CreatePolicyVersion", "iam:PutRolePolicy"):
        assert granted_on(action, BOUNDARY_ARN, [s for s in BOUNDARY["Statement"] if s["Effect"] == "Deny"])


# Where each resource type's name goes in its ARN, and the action that creates it (Service Authorization
# Reference): a name the stacks give, or the one CloudFormation makes from the stack's, must fall under it.
NAMED = {
    "AWS::ECR::Repository": ("RepositoryName", "ecr:CreateRepository", "arn:aws:ecr:{r}:{a}:repository/{n}"),
    "AWS::Logs::LogGroup": ("LogGroupName", "logs:CreateLogGroup", "arn:aws:logs:{r}:{a}:log-group:{n}"),
    "AWS::CloudWatch::Dashboard": (
        "DashboardName",
        "cloudwatch:PutDashboard",
        "arn:aws:cloudwatch::{a}:dashboard/{n}",
    ),
    "AWS::CloudWatch::Alarm": (
        "AlarmName",
        "cloudwatch:PutMetricAlarm",
        "arn:aws:cloudwatch:{r}:{a}:alarm:{n}",
    ),
    "AWS::CloudWatch::CompositeAlarm": (
        "AlarmName",
        "cloudwatch:PutCompositeAlarm",
        "arn:aws:cloudwatch:{r}:{a}:alarm:{n}",
    ),
    "AWS::ECS::TaskDefinition": (
        "Family",
        "ecs:RegisterTaskDefinition",
        "arn:aws:ecs:{r}:{a}:task-definition/{n}:1",
    ),
    "AWS::ECS::Cluster": ("ClusterName", "ecs:CreateCluster", "arn:aws:ecs:{r}:{a}:cluster/{n}"),
    "AWS::SageMaker::Endpoint": (
        "EndpointName",
        "sagemaker:CreateEndpoint",
        "arn:aws:sagemaker:{r}:{a}:endpoint/{n}",
    ),
    "AWS::SecretsManager::Secret": (
        "Name",
        "secretsmanager:CreateSecret",
        "arn:aws:secretsmanager:{r}:{a}:secret:{n}-AbCdEf",
    ),
    "AWS::KMS::Alias": ("AliasName", "kms:CreateAlias", "arn:aws:kms:{r}:{a}:{n}"),
    "AWS::Lambda::Function": ("FunctionName", "lambda:CreateFunction", "arn:aws:lambda:{r}:{a}:function:{n}"),
    "AWS::SNS::Topic": ("TopicName", "sns:CreateTopic", "arn:aws:sns:{r}:{a}:{n}"),
    "AWS::Events::Rule": ("Name", "events:PutRule", "arn:aws:events:{r}:{a}:rule/{n}"),
    "AWS::Scheduler::ScheduleGroup": (
        "Name",
        "scheduler:CreateScheduleGroup",
        "arn:aws:scheduler:{r}:{a}:schedule-group/{n}",
    ),
    "AWS::AutoScaling::AutoScalingGroup": (
        "AutoScalingGroupName",
        "autoscaling:CreateAutoScalingGroup",
        "arn:aws:autoscaling:{r}:{a}:autoScalingGroup:0a1b:autoScalingGroupName/{n}",
    ),
    "AWS::S3::Bucket": ("BucketName", "s3:CreateBucket", "arn:aws:s3:::{n}"),
    "AWS::EKS::Cluster": ("Name", "eks:DescribeCluster", "arn:aws:eks:{r}:{a}:cluster/{n}"),
    "AWS::SQS::Queue": ("QueueName", "sqs:CreateQueue", "arn:aws:sqs:{r}:{a}:{n}"),
}
ROUTE_OF_STACK = {"SonicEcs": "ecs", "SonicSageMaker": "sagemaker", "SonicEks": "eks"}


def physical_name(value: Any, stack_name: str) -> str:
    """A name as deployed: a Ref to another resource stands for the name CloudFormation gives it."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        delimiter, parts = value["Fn::Join"]
        return str(delimiter).join(physical_name(part, stack_name) for part in parts)
    return f"{stack_name}-Resource-1A2B3C4D5E6F7"


def test_every_name_the_stacks_create_falls_under_the_policy(templates: dict[str, dict[str, Any]]) -> None:
    checked = 0
    for name, body in templates.items():
        variant, stack_id = name.split("/")
        environment = re.sub(r"-(closed|branches|existing)$", "", variant)
        stack_name = f"sonic-{environment}-{ROUTE_OF_STACK[stack_id]}"
        for logical_id, resource in body["Resources"].items():
            if resource["Type"] not in NAMED:
                continue
            name_property, action, arn = NAMED[resource["Type"]]
            given = resource.get("Properties", {}).get(name_property)
            generated = f"{stack_name}-{logical_id}-1A2B3C4D5E6F7"
            physical = physical_name(given, stack_name) if given is not None else generated
            if resource["Type"] == "AWS::S3::Bucket":
                physical = physical.lower()
            assert granted_on(action, arn.format(r=REGION, a=ACCOUNT, n=physical), allowed()), (
                f"{name}/{logical_id}: {action} on {physical}"
            )
            checked += 1
    assert checked > 100


@pytest.mark.parametrize(
    ("action", "resource"),
    [
        # The ID is drawn when the call creates the resource: IAM cannot be given its ARN beforehand.
        ("application-autoscaling:RegisterScalableTarget", "*"),
        ("elasticfilesystem:TagResource", "*"),
        # Tags on CreateKey: kms:TagResource "must cover all KMS keys in the account and Region" (AWS KMS
        # Developer Guide, "Managing KMS key tags with API operations").
        ("kms:TagResource", f"arn:aws:kms:{REGION}:{ACCOUNT}:key/0b4f6e3a-1c2d-4e5f-8a9b-0c1d2e3f4a5b"),
    ],
)
def test_what_a_create_call_tags_or_names_is_granted(action: str, resource: str) -> None:
    assert granted_on(action, resource, allowed())
