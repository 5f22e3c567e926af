"""CapacityEvents: the two rules (their patterns, checked against AWS's own example events with a small local
matcher), their one target each, the one native resource policy that lets EventBridge write (no custom
resource, no Lambda), the encrypted log group, and GpuLaunchesFailing in CapacityAtRisk."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk.assertions import Template

from sonic_deploy.config import Settings
from sonic_deploy.constructs.alerting import Alerting
from sonic_deploy.dashboard_render import resolve
from sonic_deploy.routes.ecs.constructs.capacity_events import WIDGET_TITLE, CapacityEvents
from tests.conftest import resources_of

PREFIX = "OperationsCapacityEvents"

# The example event of "EC2 Instance Launch Unsuccessful" in the Amazon EC2 Auto Scaling User Guide, "Amazon
# EC2 Auto Scaling event reference", "Unsuccessful scaling events" (its placeholders as the guide writes them).
LAUNCH_UNSUCCESSFUL: dict[str, Any] = {
    "version": "0",
    "id": "12345678-1234-1234-1234-123456789012",
    "detail-type": "EC2 Instance Launch Unsuccessful",
    "source": "aws.autoscaling",
    "account": "123456789012",
    "time": "yyyy-mm-ddThh:mm:ssZ",
    "region": "us-west-2",
    "resources": ["auto-scaling-group-arn", "instance-arn"],
    "detail": {
        "StatusCode": "Failed",
        "AutoScalingGroupName": "my-auto-scaling-group",
        "ActivityId": "87654321-4321-4321-4321-210987654321",
        "Details": {"Availability Zone": "us-west-2b", "Subnet ID": "subnet-12345678"},
        "RequestId": "12345678-1234-1234-1234-123456789012",
        "StatusMessage": "message-text",
        "EndTime": "yyyy-mm-ddThh:mm:ssZ",
        "EC2InstanceId": "i-1234567890abcdef0",
        "StartTime": "yyyy-mm-ddThh:mm:ssZ",
        "Cause": "description-text",
    },
}

# The example "Service task placement failure event" in the Amazon ECS Developer Guide, "Amazon ECS service
# action events" (there: a FARGATE_SPOT service that got no Spot capacity).
PLACEMENT_FAILURE: dict[str, Any] = {
    "version": "0",
    "id": "ddca6449-b258-46c0-8653-e0e3a6d0468b",
    "detail-type": "ECS Service Action",
    "source": "aws.ecs",
    "account": "111122223333",
    "time": "2019-11-19T19:55:38Z",
    "region": "us-west-2",
    "resources": ["arn:aws:ecs:us-west-2:111122223333:service/default/servicetest"],
    "detail": {
        "eventType": "ERROR",
        "eventName": "SERVICE_TASK_PLACEMENT_FAILURE",
        "clusterArn": "arn:aws:ecs:us-west-2:111122223333:cluster/default",
        "capacityProviderArns": ["arn:aws:ecs:us-west-2:111122223333:capacity-provider/FARGATE_SPOT"],
        "reason": "RESOURCE:FARGATE",
        "createdAt": "2019-11-06T19:09:33.087Z",
    },
}

# What the examples' group and service stand for in the tests below.
OUR_GROUP = "sonic-dev-gpu-group"
OUR_SERVICE = "arn:aws:ecs:us-east-2:111122223333:service/sonic-dev/gpu-worker"


def matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    """EventBridge's matching for patterns of exact values only: every field the pattern names must be in the
    event, nested alike; a field matches if its value is one of the pattern's values or, when the event's value
    is an array, if the two arrays share a value (EventBridge User Guide, "Arrays in Amazon EventBridge event
    patterns"). Any other kind of filter (prefix, anything-but, ...) is refused, not guessed at."""
    for field, wanted in pattern.items():
        if field not in event:
            return False
        value = event[field]
        if isinstance(wanted, dict):
            if not isinstance(value, dict) or not matches(wanted, value):
                return False
            continue
        if not isinstance(wanted, list) or not all(isinstance(w, str | int | float | bool) for w in wanted):
            raise ValueError(
                f"{field}: {wanted!r} is not a list of exact values; this matcher does not do that"
            )
        values = value if isinstance(value, list) else [value]
        if not set(values) & set(wanted):
            return False
    return True


def _concrete(pattern: Any, names: dict[str, str]) -> Any:
    """The synthesized pattern with each {"Ref": logical id} replaced by the value it stands for."""
    if isinstance(pattern, dict):
        if set(pattern) == {"Ref"}:
            return names[pattern["Ref"]]
        return {key: _concrete(value, names) for key, value in pattern.items()}
    if isinstance(pattern, list):
        return [_concrete(value, names) for value in pattern]
    return pattern


def _ours(template: Template, type_name: str) -> dict[str, dict[str, Any]]:
    """CapacityEvents' resources of a type, by logical ID."""
    return {key: r for key, r in resources_of(template, type_name).items() if key.startswith(PREFIX)}


def _one(template: Template, type_name: str, name: str) -> tuple[str, dict[str, Any]]:
    ((key, resource),) = [
        (k, r) for k, r in _ours(template, type_name).items() if k.startswith(PREFIX + name)
    ]
    return key, resource


def _group_and_worker(template: Template) -> tuple[str, str]:
    (group,) = resources_of(template, "AWS::AutoScaling::AutoScalingGroup")
    (worker,) = [k for k in resources_of(template, "AWS::ECS::Service") if k.startswith("SonicGpuWorker")]
    return group, worker


@pytest.fixture(scope="module")
def patterns(ecs_template: Template) -> dict[str, dict[str, Any]]:
    """Each rule's pattern with our group's name and our service's ARN in place of their references."""
    group, worker = _group_and_worker(ecs_template)
    names = {group: OUR_GROUP, worker: OUR_SERVICE}
    return {
        name: _concrete(_one(ecs_template, "AWS::Events::Rule", name)[1]["Properties"]["EventPattern"], names)
        for name in ("LaunchFailures", "PlacementFailures")
    }


def test_the_launch_rule_is_the_gpu_groups_failed_launches(ecs_template: Template) -> None:
    group, _ = _group_and_worker(ecs_template)
    _, rule = _one(ecs_template, "AWS::Events::Rule", "LaunchFailures")
    assert rule["Properties"]["EventPattern"] == {
        "source": ["aws.autoscaling"],
        "detail-type": ["EC2 Instance Launch Unsuccessful"],
        "detail": {"AutoScalingGroupName": [{"Ref": group}]},
    }
    assert rule["Properties"]["State"] == "ENABLED"


def test_the_placement_rule_is_the_workers_failed_placements(ecs_template: Template) -> None:
    _, worker = _group_and_worker(ecs_template)
    _, rule = _one(ecs_template, "AWS::Events::Rule", "PlacementFailures")
    assert rule["Properties"]["EventPattern"] == {
        "source": ["aws.ecs"],
        "detail-type": ["ECS Service Action"],
        "detail": {"eventName": ["SERVICE_TASK_PLACEMENT_FAILURE"]},
        "resources": [{"Ref": worker}],
    }


def test_awss_example_events_match_for_our_group_and_service(patterns: dict[str, dict[str, Any]]) -> None:
    launch = copy.deepcopy(LAUNCH_UNSUCCESSFUL)
    launch["detail"]["AutoScalingGroupName"] = OUR_GROUP
    placement = copy.deepcopy(PLACEMENT_FAILURE)
    placement["resources"] = [OUR_SERVICE]
    assert matches(patterns["LaunchFailures"], launch)
    assert matches(patterns["PlacementFailures"], placement)
    # Each rule catches its own kind only.
    assert not matches(patterns["LaunchFailures"], placement)
    assert not matches(patterns["PlacementFailures"], launch)


def test_other_groups_services_and_events_do_not_match(patterns: dict[str, dict[str, Any]]) -> None:
    # The examples as AWS prints them: another group, another service.
    assert not matches(patterns["LaunchFailures"], LAUNCH_UNSUCCESSFUL)
    assert not matches(patterns["PlacementFailures"], PLACEMENT_FAILURE)
    launched = copy.deepcopy(LAUNCH_UNSUCCESSFUL)
    launched["detail"]["AutoScalingGroupName"] = OUR_GROUP
    launched["detail-type"] = "EC2 Instance Launch Successful"
    assert not matches(patterns["LaunchFailures"], launched)
    steady = copy.deepcopy(PLACEMENT_FAILURE)
    steady["resources"] = [OUR_SERVICE]
    steady["detail"]["eventName"] = "SERVICE_STEADY_STATE"
    assert not matches(patterns["PlacementFailures"], steady)


def test_the_matcher_refuses_what_it_does_not_implement() -> None:
    """So a pattern that gains a prefix or anything-but filter fails these tests instead of passing them."""
    with pytest.raises(ValueError, match="not a list of exact values"):
        matches({"source": [{"prefix": "aws."}]}, {"source": "aws.ecs"})
    assert matches({"resources": ["b"]}, {"resources": ["a", "b"]})
    assert not matches({"detail": {"x": ["1"]}}, {"detail": {}})


def test_both_rules_write_to_the_log_group_without_a_role(ecs_template: Template) -> None:
    group, _ = _one(ecs_template, "AWS::Logs::LogGroup", "Logs")
    for name in ("LaunchFailures", "PlacementFailures"):
        _, rule = _one(ecs_template, "AWS::Events::Rule", name)
        (target,) = rule["Properties"]["Targets"]
        # "For Amazon CloudWatch Logs targets, do not specify a RoleArn" (EventBridge User Guide).
        assert set(target) == {"Arn", "Id"}
        arn = resolve(target["Arn"])
        assert re.fullmatch(rf"arn:aws:logs:us-east-2:<AWS::AccountId>:log-group:<{group}>", arn), arn


def test_one_native_resource_policy_scoped_to_the_log_group_and_the_rules(ecs_template: Template) -> None:
    (policy,) = resources_of(ecs_template, "AWS::Logs::ResourcePolicy").values()
    document = json.loads(resolve(policy["Properties"]["PolicyDocument"]))
    group, _ = _one(ecs_template, "AWS::Logs::LogGroup", "Logs")
    launch, _ = _one(ecs_template, "AWS::Events::Rule", "LaunchFailures")
    placement, _ = _one(ecs_template, "AWS::Events::Rule", "PlacementFailures")
    create, put = document["Statement"]
    for statement in (create, put):
        assert statement["Effect"] == "Allow"
        assert statement["Principal"] == {"Service": "events.amazonaws.com"}
        assert statement["Resource"] == f"<{group}.Arn>"
    # EventBridge's CreateLogStream carries no rule ARN (aws-samples/serverless-patterns#618): under a
    # SourceArn condition it would be refused and the log stay empty. Only PutLogEvents names the rules.
    assert create["Action"] == "logs:CreateLogStream"
    assert "Condition" not in create
    assert put["Action"] == "logs:PutLogEvents"
    assert put["Condition"] == {
        "ArnEquals": {"aws:SourceArn": [f"<{launch}.Arn>", f"<{placement}.Arn>"]},
        "StringEquals": {"aws:SourceAccount": "<AWS::AccountId>"},
    }
    # Not CDK's default for a log group target: no custom resource of its own (AwsCustomResource's one
    # Lambda serves only the S3 prefix-list lookup, constructs/egress.py).
    resources = ecs_template.to_json()["Resources"]
    assert not [r for r in resources.values() if r["Type"] == "Custom::CloudwatchLogResourcePolicy"]
    custom = [key for key, r in resources.items() if r["Type"] == "Custom::AWS"]
    assert len(custom) == 1 and custom[0].startswith("S3PrefixListLookup")


def test_the_log_group_is_encrypted_kept_and_expires(ecs_template: Template, dev_settings: Settings) -> None:
    _, group = _one(ecs_template, "AWS::Logs::LogGroup", "Logs")
    (key,) = resources_of(ecs_template, "AWS::KMS::Key")
    assert group["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key, "Arn"]}
    assert group["Properties"]["RetentionInDays"] == dev_settings.environment.log_retention_days
    assert (group["DeletionPolicy"], group["UpdateReplacePolicy"]) == ("RetainExceptOnCreate", "Retain")


def test_gpu_launches_failing_alarm(ecs_template: Template) -> None:
    ((key, alarm),) = [
        (k, r["Properties"])
        for k, r in resources_of(ecs_template, "AWS::CloudWatch::Alarm").items()
        if k.startswith("AlertingGpuLaunchesFailing")
    ]
    launch, _ = _one(ecs_template, "AWS::Events::Rule", "LaunchFailures")
    ((metric,),) = [[m for m in alarm["Metrics"] if "MetricStat" in m]]
    stat = metric["MetricStat"]
    assert stat["Metric"] == {
        "Namespace": "AWS/Events",
        "MetricName": "MatchedEvents",
        "Dimensions": [{"Name": "RuleName", "Value": {"Ref": launch}}],
    }
    assert (stat["Stat"], stat["Period"]) == ("Sum", 300)
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    # One failure alarms; three quiet five-minute periods close it; no events is no failure.
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (3, 1)
    assert alarm["TreatMissingData"] == "notBreaching"
    for cause in ("InsufficientInstanceCapacity", "G and VT", "capacity reservation", WIDGET_TITLE):
        assert cause in alarm["AlarmDescription"], cause
    assert not {"AlarmActions", "OKActions"} & set(alarm)
    # In CapacityAtRisk, the composite that names capacity short or about to be.
    (at_risk,) = [
        r["Properties"]
        for k, r in resources_of(ecs_template, "AWS::CloudWatch::CompositeAlarm").items()
        if k.startswith("AlertingCapacityAtRisk")
    ]
    assert {"Fn::GetAtt": [key, "Arn"]} in at_risk["AlarmRule"]["Fn::Join"][1]


def test_every_group_and_every_service_is_in_the_patterns() -> None:
    """Two groups (the fallback the lead adds later) and two services: each one named, none dropped."""
    stack = Stack()
    key = kms.Key(stack, "Key")
    groups = [
        autoscaling.AutoScalingGroup.from_auto_scaling_group_name(stack, name, name)
        for name in ("gpu-first", "gpu-fallback")
    ]
    vpc = ec2.Vpc.from_vpc_attributes(stack, "Vpc", vpc_id="vpc-0123456789abcdef0", availability_zones=["a"])
    cluster = ecs.Cluster.from_cluster_attributes(stack, "Cluster", cluster_name="c", vpc=vpc)
    services = [
        ecs.Ec2Service.from_ec2_service_attributes(
            stack, name, cluster=cluster, service_arn=f"arn:aws:ecs:us-east-2:111122223333:service/c/{name}"
        )
        for name in ("workers-a", "workers-b")
    ]
    CapacityEvents(
        stack,
        "CapacityEvents",
        groups=groups,
        services=services,
        key=key,
        log_retention=logs.RetentionDays.ONE_MONTH,
        alerting=Alerting(stack, "Alerting", key=key),
    )
    rules = {
        key.removeprefix("CapacityEvents")[:-8]: r["Properties"]["EventPattern"]
        for key, r in resources_of(Template.from_stack(stack), "AWS::Events::Rule").items()
    }
    assert rules["LaunchFailures"]["detail"]["AutoScalingGroupName"] == ["gpu-first", "gpu-fallback"]
    assert rules["PlacementFailures"]["resources"] == [
        "arn:aws:ecs:us-east-2:111122223333:service/c/workers-a",
        "arn:aws:ecs:us-east-2:111122223333:service/c/workers-b",
    ]


def test_no_group_or_no_service_is_refused() -> None:
    stack = Stack()
    key = kms.Key(stack, "Key")
    with pytest.raises(ValueError, match="at least one GPU group and one worker service"):
        CapacityEvents(
            stack,
            "CapacityEvents",
            groups=[],
            services=[],
            key=key,
            log_retention=logs.RetentionDays.ONE_MONTH,
            alerting=Alerting(stack, "Alerting", key=key),
        )
