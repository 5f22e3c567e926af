"""`preflight --after-deploy ecs`: the stack is deployed with its outputs, and each of its ECS services runs
the tasks it wants, its last rollout done (ecs:ListServices, ecs:DescribeServices)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from sonic_deploy.config import Settings
from sonic_deploy.preflight.deployed_stack import check_route_stack
from sonic_deploy.preflight.results import CheckResult, aws_error, failed, passed, skipped
from sonic_deploy.routes.ecs import outputs

if TYPE_CHECKING:
    from mypy_boto3_ecs import ECSClient

    from sonic_deploy.preflight.runner import AwsClients

# DescribeServices takes at most 10 services a call (its `services` parameter).
DESCRIBE_AT_ONCE = 10


def after_deploy(clients: AwsClients, settings: Settings) -> list[CheckResult]:
    result, stack = check_route_stack(
        clients.cloudformation, settings, "ecs", (*outputs.FOR_CONNECT, outputs.CLUSTER_NAME)
    )
    if stack is None:
        return [result]
    cluster = stack.outputs[outputs.CLUSTER_NAME]
    found = passed(result.check, f"{stack.status}: cluster {cluster}, API {stack.outputs[outputs.API_URL]}")
    return [found, *check_services(clients.ecs, cluster, settings.environment.region)]


def check_services(ecs: ECSClient, cluster: str, region: str) -> list[CheckResult]:
    """One row per service of the stack's cluster: its tasks running as wanted, its rollout done."""
    try:
        arns = [
            arn
            for page in ecs.get_paginator("list_services").paginate(cluster=cluster)
            for arn in page["serviceArns"]
        ]
        described: list[Mapping[str, Any]] = []
        for start in range(0, len(arns), DESCRIBE_AT_ONCE):
            answer = ecs.describe_services(cluster=cluster, services=arns[start : start + DESCRIBE_AT_ONCE])
            described.extend(answer["services"])
    except ClientError as error:
        return [aws_error(f"services of cluster {cluster}", error, "ecs:ListServices, ecs:DescribeServices")]
    if not described:
        return [
            failed(f"services of cluster {cluster}", "none", "deploy the route again: its stack makes them")
        ]
    return [
        _service(service, cluster, region) for service in sorted(described, key=lambda s: s["serviceName"])
    ]


def _service(service: Mapping[str, Any], cluster: str, region: str) -> CheckResult:
    name = service["serviceName"]
    check = f"service {name}"
    running, desired = service.get("runningCount", 0), service.get("desiredCount", 0)
    deployments = service.get("deployments", [])
    primary: Mapping[str, Any] = next((d for d in deployments if d.get("status") == "PRIMARY"), {})
    rollout = primary.get("rolloutState")
    events = (
        f"`aws ecs describe-services --cluster {cluster} --services {name} --region {region}` (its events, "
        "the stopped tasks' reasons)"
    )
    if rollout == "FAILED":
        return failed(
            check, f"its last rollout failed: {primary.get('rolloutStateReason', '')}".strip(), events
        )
    if rollout == "IN_PROGRESS":
        return skipped(
            check, f"rolling out ({running} of {desired} tasks running): run this again once it ends"
        )
    if running < desired:
        return failed(check, f"{running} of {desired} tasks running", events)
    return passed(check, f"{running} of {desired} tasks running")
