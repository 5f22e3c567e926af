"""`python -m sonic_deploy.changes execution-policy` (run by `make bootstrap`), against moto's IAM: creates
the permissions boundary and the customer-managed execution policies (the file split to fit IAM's size
quota) once, adds a default version when a file changes, changes nothing otherwise, and keeps within IAM's
five versions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sonic_deploy.changes.cli import main
from sonic_deploy.changes.execution_policy import MAX_POLICY_VERSIONS, POLICY_NAME, split_document
from sonic_deploy.config.bootstrap import PERMISSIONS_BOUNDARY_NAME

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "config/bootstrap/cloudformation-execution-policy.json"
BOUNDARY = REPO / "config/bootstrap/permissions-boundary.json"
ACCOUNT = "123456789012"  # moto's account
ARN = f"arn:aws:iam::{ACCOUNT}:policy/{POLICY_NAME}"
SECOND = f"{ARN}-2"
BOUNDARY_ARN = f"arn:aws:iam::{ACCOUNT}:policy/{PERMISSIONS_BOUNDARY_NAME}"
PARTS = len(split_document(json.loads(SHIPPED.read_text()), SHIPPED))
PRINTED = ",".join([ARN, *(f"{ARN}-{n}" for n in range(2, PARTS + 1))]) + "\n"


def apply(document: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(
        [
            "execution-policy",
            "--env",
            "dev",
            "--account",
            ACCOUNT,
            "--document",
            str(document),
            "--boundary-document",
            str(BOUNDARY),
        ]
    )
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def default_document(iam: Any, arn: str = ARN) -> Any:
    version = iam.get_policy(PolicyArn=arn)["Policy"]["DefaultVersionId"]
    return iam.get_policy_version(PolicyArn=arn, VersionId=version)["PolicyVersion"]["Document"]


def edited(tmp_path: Path, n: int) -> Path:
    document = json.loads(SHIPPED.read_text())
    document["Statement"][0]["Sid"] = f"Edit{n}"
    path = tmp_path / f"policy-{n}.json"
    path.write_text(json.dumps(document))
    return path


def test_creates_the_boundary_and_the_policies_and_prints_their_arns(
    iam: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = apply(SHIPPED, capsys)
    assert PARTS == 2 and code == 0 and out == PRINTED and "created" in err
    assert f"permissions boundary {BOUNDARY_ARN}: created" in err
    assert default_document(iam, BOUNDARY_ARN) == json.loads(BOUNDARY.read_text())
    statements = default_document(iam)["Statement"] + default_document(iam, SECOND)["Statement"]
    assert statements == json.loads(SHIPPED.read_text())["Statement"]


def test_a_second_run_changes_nothing(iam: Any, capsys: pytest.CaptureFixture[str]) -> None:
    apply(SHIPPED, capsys)
    code, out, err = apply(SHIPPED, capsys)
    assert code == 0 and out == PRINTED and "unchanged" in err and "created" not in err
    for arn in (ARN, SECOND, BOUNDARY_ARN):
        assert len(iam.list_policy_versions(PolicyArn=arn)["Versions"]) == 1


def test_a_changed_file_becomes_the_default_version(
    iam: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    apply(SHIPPED, capsys)
    code, _, err = apply(edited(tmp_path, 1), capsys)
    assert code == 0 and "updated" in err
    assert default_document(iam)["Statement"][0]["Sid"] == "Edit1"


def test_the_oldest_version_goes_when_iam_holds_five(
    iam: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    apply(SHIPPED, capsys)
    for n in range(1, MAX_POLICY_VERSIONS + 2):
        assert apply(edited(tmp_path, n), capsys)[0] == 0
    versions = iam.list_policy_versions(PolicyArn=ARN)["Versions"]
    assert len(versions) == MAX_POLICY_VERSIONS
    assert default_document(iam)["Statement"][0]["Sid"] == f"Edit{MAX_POLICY_VERSIONS + 1}"


def test_a_broken_file_is_refused_in_one_line(
    iam: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"Version": "2012-10-17"}')
    code, _, err = apply(broken, capsys)
    assert code == 2 and err.strip() == f"error: {broken}: not an IAM policy document (no Statement)"


def test_refused_by_iam_says_what_the_credentials_need(
    iam: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.exceptions import ClientError

    def refuse(*_: Any, **__: Any) -> Any:
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "not authorized"}}, "GetPolicy")

    monkeypatch.setattr("sonic_deploy.changes.execution_policy.ensure_execution_policy", refuse)
    code, _, err = apply(SHIPPED, capsys)
    assert code == 2 and "not authorized" in err and "iam:CreatePolicy" in err and "EXECUTION_POLICY=" in err


def test_a_statement_over_the_size_quota_is_refused_in_one_line(
    iam: Any, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    document = json.loads(SHIPPED.read_text())
    document["Statement"][0]["Action"] = [f"ec2:Describe{'X' * 40}{n}" for n in range(200)]
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(document))
    code, _, err = apply(path, capsys)
    assert code == 2 and err.strip() == (
        f"error: {path}: statement NoResourceLevelPermissions alone is over IAM's 6144 characters for a "
        "managed policy: split it in two"
    )
    assert iam.list_policies(Scope="Local")["Policies"] == []
