"""LicenceStore as the air-gapped ECS route uses it: who may mount the file system, and its backups."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Template

from tests.conftest import resources_of


def _file_system(template: Template) -> dict[str, Any]:
    (file_system,) = resources_of(template, "AWS::EFS::FileSystem").values()
    return dict(file_system["Properties"])


def _proxy_task_role(template: Template) -> str:
    task = next(
        t["Properties"]
        for k, t in resources_of(template, "AWS::ECS::TaskDefinition").items()
        if k.startswith("SonicLicenceProxy")
    )
    return str(task["TaskRoleArn"]["Fn::GetAtt"][0])


def test_only_the_licence_proxy_role_may_mount_and_only_over_tls(air_gapped: Template) -> None:
    statements = {s["Sid"]: s for s in _file_system(air_gapped)["FileSystemPolicy"]["Statement"]}
    assert set(statements) == {"LicenceProxyOnly", "DenyWithoutTls"}  # no statement for any principal
    proxy = statements["LicenceProxyOnly"]
    assert proxy["Effect"] == "Allow"
    assert proxy["Principal"] == {"AWS": {"Fn::GetAtt": [_proxy_task_role(air_gapped), "Arn"]}}
    assert proxy["Condition"] == {"Bool": {"elasticfilesystem:AccessedViaMountTarget": "true"}}
    assert sorted(proxy["Action"]) == [
        "elasticfilesystem:ClientMount",
        "elasticfilesystem:ClientRootAccess",
        "elasticfilesystem:ClientWrite",
    ]
    tls = statements["DenyWithoutTls"]
    assert (tls["Effect"], tls["Principal"], tls["Action"]) == ("Deny", {"AWS": "*"}, "*")
    assert tls["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_the_proxy_role_needs_no_policy_of_its_own_for_the_file_system(air_gapped: Template) -> None:
    role = _proxy_task_role(air_gapped)
    policies = [
        p
        for p in resources_of(air_gapped, "AWS::IAM::Policy").values()
        if {"Ref": role} in p["Properties"]["Roles"]
    ]
    assert "elasticfilesystem" not in str(policies)  # the file system's policy grants it


def test_backed_up_daily_by_efs_automatic_backups(air_gapped: Template) -> None:
    assert _file_system(air_gapped)["BackupPolicy"] == {"Status": "ENABLED"}
