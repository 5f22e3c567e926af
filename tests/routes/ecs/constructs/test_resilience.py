"""ResilienceExperiments: absent unless enabled; four FIS templates with the documented action ids, one
target each picked at random, stopped by the route's alarms; a role that can touch only this cluster's
tasks and this group's instances."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template

from tests.conftest import CONFIG_DIR, resources_of, synthesize_from

FIS = "AWS::FIS::ExperimentTemplate"
# The shipped [ecs.resilience] table's values, as the rehearsal below sets them.
ENABLED = {"enabled": "true", "insufficient_capacity_minutes": "7", "insufficient_capacity_percent": "80"}
STOP_ALARMS = {"NoWorkerCapacity", "UnserviceableRequests", "WorkerTtfaP95", "UnhealthyApiTargets"}


def _enabled(root: Path) -> Template:
    config = root / "config"
    shutil.copytree(CONFIG_DIR, config)
    dev = config / "environments" / "dev.toml"
    text = dev.read_text()
    for key, value in ENABLED.items():
        text, found = re.subn(rf"(?m)^{key} = \S+", f"{key} = {value}", text)
        assert found == 1, f"{key} not in the shipped dev.toml"
    dev.write_text(text)
    return Template.from_stack(synthesize_from(config, routes=["ecs"])["ecs"])


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    return _enabled(tmp_path_factory.mktemp("resilience"))


def _experiment(template: Template, name: str) -> dict[str, Any]:
    found = [r["Properties"] for logical_id, r in resources_of(template, FIS).items() if name in logical_id]
    assert len(found) == 1, f"expected one {name} template, found {len(found)}"
    props: dict[str, Any] = found[0]
    return props


def _logical_id(template: Template, type_name: str, contains: str) -> str:
    (found,) = [logical_id for logical_id in resources_of(template, type_name) if contains in logical_id]
    return found


def test_nothing_fis_related_when_disabled(ecs_template: Template) -> None:
    shipped = ecs_template.to_json()
    assert not resources_of(ecs_template, FIS)
    assert not [logical_id for logical_id in shipped["Resources"] if logical_id.startswith("Resilience")]
    assert not [name for name in shipped.get("Outputs", {}) if name.endswith("Experiment")]
    assert "fis.amazonaws.com" not in str(shipped)


@pytest.mark.parametrize(
    ("name", "service"),
    [("StopGpuWorkerTask", "SonicGpuWorkerService"), ("StopApiServerTask", "SonicApiServerService")],
)
def test_stop_one_task_of_the_service(template: Template, name: str, service: str) -> None:
    props = _experiment(template, name)
    assert [a["ActionId"] for a in props["Actions"].values()] == ["aws:ecs:stop-task"]
    ((action,),) = [list(props["Actions"].values())]
    (target_name,) = action["Targets"].values()
    assert list(action["Targets"]) == ["Tasks"]
    target = props["Targets"][target_name]
    assert target["ResourceType"] == "aws:ecs:task"
    assert target["SelectionMode"] == "COUNT(1)"
    assert target["Parameters"] == {
        "cluster": {"Ref": _logical_id(template, "AWS::ECS::Cluster", "Cluster")},
        "service": {"Fn::GetAtt": [_logical_id(template, "AWS::ECS::Service", service), "Name"]},
    }


def test_terminate_one_instance_of_the_gpu_group(template: Template) -> None:
    props = _experiment(template, "TerminateGpuInstance")
    (action,) = props["Actions"].values()
    assert action["ActionId"] == "aws:ec2:terminate-instances"
    target = props["Targets"][action["Targets"]["Instances"]]
    assert target["ResourceType"] == "aws:ec2:instance"
    assert target["SelectionMode"] == "COUNT(1)"
    group = _logical_id(template, "AWS::AutoScaling::AutoScalingGroup", "GpuCapacity")
    assert target["ResourceTags"] == {"aws:autoscaling:groupName": {"Ref": group}}
    assert target["Filters"] == [{"Path": "State.Name", "Values": ["running"]}]


def test_insufficient_capacity_on_the_gpu_group_in_its_az(template: Template) -> None:
    props = _experiment(template, "GpuInsufficientCapacity")
    actions = props["Actions"]
    refuse = actions["RefuseLaunches"]
    assert refuse["ActionId"] == "aws:ec2:asg-insufficient-instance-capacity-error"
    assert refuse["Parameters"] == {
        "availabilityZoneIdentifiers": "us-east-2a",
        "duration": "PT7M",
        "percentage": "80",
    }
    group = props["Targets"][refuse["Targets"]["AutoScalingGroups"]]
    assert group["ResourceType"] == "aws:ec2:autoscaling-group"
    assert group["ResourceTags"] == {
        "aws:cloudformation:stack-name": {"Ref": "AWS::StackName"},
        "aws:cloudformation:logical-id": _logical_id(
            template, "AWS::AutoScaling::AutoScalingGroup", "GpuCapacity"
        ),
    }
    # One instance goes once the fault is in place, so that its replacement is the launch refused.
    assert actions["SettleFault"] == {"ActionId": "aws:fis:wait", "Parameters": {"duration": "PT1M"}}
    assert actions["Terminate"]["ActionId"] == "aws:ec2:terminate-instances"
    assert actions["Terminate"]["StartAfter"] == ["SettleFault"]
    assert props["Targets"][actions["Terminate"]["Targets"]["Instances"]]["SelectionMode"] == "COUNT(1)"


def test_every_template_stops_on_the_routes_alarms(template: Template) -> None:
    alarms = resources_of(template, "AWS::CloudWatch::Alarm")
    experiments = resources_of(template, FIS)
    assert len(experiments) == 4
    for experiment in experiments.values():
        conditions = experiment["Properties"]["StopConditions"]
        assert {c["Source"] for c in conditions} == {"aws:cloudwatch:alarm"}
        referenced = [c["Value"]["Fn::GetAtt"] for c in conditions]
        assert all(attribute == "Arn" and alarm in alarms for alarm, attribute in referenced)
        names = {next(name for name in STOP_ALARMS if name in alarm) for alarm, _ in referenced}
        assert names == STOP_ALARMS


def test_experiments_log_to_a_group_encrypted_with_the_stack_key(template: Template) -> None:
    group = _logical_id(template, "AWS::Logs::LogGroup", "Resilience")
    props = resources_of(template, "AWS::Logs::LogGroup")[group]["Properties"]
    assert props["KmsKeyId"] == {"Fn::GetAtt": [_logical_id(template, "AWS::KMS::Key", "Encryption"), "Arn"]}
    assert props["RetentionInDays"] == 30  # dev's log_retention_days
    for experiment in resources_of(template, FIS).values():
        assert experiment["Properties"]["LogConfiguration"] == {
            "CloudWatchLogsConfiguration": {"LogGroupArn": {"Fn::GetAtt": [group, "Arn"]}},
            "LogSchemaVersion": 2,
        }


def test_templates_tagged_and_their_ids_are_outputs(template: Template) -> None:
    outputs = template.to_json()["Outputs"]
    for logical_id, experiment in resources_of(template, FIS).items():
        tags = experiment["Properties"]["Tags"]
        assert tags["project"] == "sonic-deploy" and tags["environment"] == "dev"
        name = tags["sonic-deploy:experiment"]
        assert outputs[f"{name}Experiment"]["Value"] == {"Fn::GetAtt": [logical_id, "Id"]}


def _statements(template: Template) -> list[dict[str, Any]]:
    (policy,) = [
        r["Properties"]
        for logical_id, r in resources_of(template, "AWS::IAM::ManagedPolicy").items()
        if logical_id.startswith("Resilience")
    ]
    statements: list[dict[str, Any]] = policy["PolicyDocument"]["Statement"]
    return statements


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else list(actions)


# What takes no resource ARN in IAM, and may stand on Resource "*" with no condition.
UNSCOPED = {
    "tag:GetResources",
    "ec2:DescribeInstances",
    "autoscaling:DescribeAutoScalingGroups",
    "logs:CreateLogDelivery",
}


def test_role_has_no_wildcard_action_and_scopes_what_changes_anything(template: Template) -> None:
    statements = _statements(template)
    assert all("*" not in action for s in statements for action in _actions(s))
    assert all(s["Effect"] == "Allow" for s in statements)
    for statement in statements:
        if statement["Resource"] == "*" and "Condition" not in statement:
            assert set(_actions(statement)) <= UNSCOPED, statement
    by_action = {action: s for s in statements for action in _actions(s)}
    cluster = _logical_id(template, "AWS::ECS::Cluster", "Cluster")
    for action in ("ecs:StopTask", "ecs:DescribeTasks", "ecs:ListTasks"):
        assert by_action[action]["Condition"] == {
            "ArnEquals": {"ecs:cluster": {"Fn::GetAtt": [cluster, "Arn"]}}
        }
    for action in ("ecs:StopTask", "ecs:DescribeTasks"):  # ListTasks names no task: its condition holds it
        assert {"Ref": cluster} in by_action[action]["Resource"]["Fn::Join"][1]
    group = _logical_id(template, "AWS::AutoScaling::AutoScalingGroup", "GpuCapacity")
    assert by_action["ec2:TerminateInstances"]["Condition"] == {
        "StringEquals": {"aws:ResourceTag/aws:autoscaling:groupName": {"Ref": group}}
    }
    inject = by_action["ec2:InjectApiError"]["Condition"]
    assert inject["StringEquals"] == {"ec2:FisActionId": "aws:ec2:asg-insufficient-instance-capacity-error"}
    assert {"Ref": group} in inject["ForAllValues:ArnLike"]["ec2:FisTargetArns"]["Fn::Join"][1]


def test_only_this_accounts_fis_experiments_assume_the_role(template: Template) -> None:
    (role,) = [
        r["Properties"]
        for logical_id, r in resources_of(template, "AWS::IAM::Role").items()
        if logical_id.startswith("Resilience")
    ]
    (statement,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert statement["Principal"] == {"Service": "fis.amazonaws.com"}
    assert statement["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert "ManagedPolicyArns" not in role  # the one customer-managed policy above, no AWS-managed FIS policy
