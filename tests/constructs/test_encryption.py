"""EncryptionKey and allow_use_through on a bare stack: the key policy lets the account administer the key
and use it only through the services named where a resource is encrypted with it."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import App, Duration, RemovalPolicy, Stack
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from sonic_deploy.constructs.encryption import (
    ADMINISTRATION,
    USE,
    EncryptionKey,
    allow_use_through,
    encrypted_bucket,
)


def _statements(stack: Stack) -> dict[str, dict[str, Any]]:
    [key] = Template.from_stack(stack).find_resources("AWS::KMS::Key").values()
    return {s["Sid"]: s for s in key["Properties"]["KeyPolicy"]["Statement"]}


def _key() -> tuple[Stack, kms.Key]:
    stack = Stack(App(), "S")
    return stack, EncryptionKey(stack, "Encryption", alias="alias/sonic-test").key


def test_the_account_administers_the_key_but_may_not_use_it() -> None:
    stack, _ = _key()
    statements = _statements(stack)
    assert set(statements) == {"AdministerNotUse", "AllowCloudWatchLogs"}
    administer = statements["AdministerNotUse"]
    assert json.dumps(administer["Principal"]).endswith(':root"]]}}')
    assert sorted(administer["Action"]) == sorted(ADMINISTRATION)
    assert "kms:PutKeyPolicy" in administer["Action"]  # the account can always repair the policy
    assert not {"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:CreateGrant"} & set(ADMINISTRATION)


def test_use_through_a_service_is_one_statement_per_service() -> None:
    stack, key = _key()
    for service in ("ecr", "ecr", "secretsmanager"):
        allow_use_through(key, service)
    statements = _statements(stack)
    assert {"UseThroughEcr", "UseThroughSecretsmanager"} <= set(statements)
    ecr = statements["UseThroughEcr"]
    assert sorted(ecr["Action"]) == sorted(USE)
    condition = ecr["Condition"]["StringEquals"]
    assert condition["kms:CallerAccount"] == {"Ref": "AWS::AccountId"}
    assert condition["kms:ViaService"] == {
        "Fn::Join": ["", ["ecr.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]
    }
    assert len(statements) == 4


def test_an_encrypted_bucket_names_s3() -> None:
    stack, key = _key()
    encrypted_bucket(
        stack,
        "Bucket",
        key=key,
        rule_id="r",
        expiration=Duration.days(1),
        removal_policy=RemovalPolicy.DESTROY,
    )
    assert "UseThroughS3" in _statements(stack)


def test_an_imported_key_is_left_alone() -> None:
    stack = Stack(App(), "S")
    imported = kms.Key.from_key_arn(stack, "K", "arn:aws:kms:us-east-2:210987654321:key/abc")
    allow_use_through(imported, "s3")  # its policy is not the stack's: nothing to add, nothing raised
    assert Template.from_stack(stack).find_resources("AWS::KMS::Key") == {}
