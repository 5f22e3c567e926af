"""SonicSecrets on a bare stack: created (placeholders, the stack's key, kept once created) or imported by
name, and what a task reads of each."""

from __future__ import annotations

import json

import pytest
from aws_cdk import App, Stack
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from sonic_deploy.constructs.sonic_secrets import REGISTRY_LOGIN_TEMPLATE, SonicSecrets
from tests.conftest import resources_of

API_KEY, REGISTRY = "sonic/test/cartesia-api-key", "sonic/test/registry-credentials"


def _secrets(*, create: bool) -> tuple[Stack, kms.Key, SonicSecrets]:
    stack = Stack(App(), "Test")
    key = kms.Key(stack, "Key")
    secrets = SonicSecrets(
        stack, "Secrets", api_key_name=API_KEY, registry_credentials_name=REGISTRY, create=create, key=key
    )
    return stack, key, secrets


def test_created_secrets_are_placeholders_on_the_key_kept_once_created() -> None:
    stack, key, _ = _secrets(create=True)
    template = Template.from_stack(stack)
    by_name = {
        s["Properties"]["Name"]: s for s in resources_of(template, "AWS::SecretsManager::Secret").values()
    }
    assert set(by_name) == {API_KEY, REGISTRY}
    key_arn = stack.resolve(key.key_arn)
    for secret in by_name.values():
        assert secret["Properties"]["KmsKeyId"] == key_arn
        assert secret["DeletionPolicy"] == "RetainExceptOnCreate"
    generated = by_name[REGISTRY]["Properties"]["GenerateSecretString"]
    assert json.loads(generated["SecretStringTemplate"]) == json.loads(REGISTRY_LOGIN_TEMPLATE)
    assert generated["GenerateStringKey"] == "password"
    # Secrets Manager may use the key, through the service only (allow_use_through).
    (key_resource,) = resources_of(template, "AWS::KMS::Key").values()
    assert "secretsmanager" in json.dumps(key_resource["Properties"]["KeyPolicy"])


def test_imported_secrets_create_nothing() -> None:
    stack, _, secrets = _secrets(create=False)
    assert resources_of(Template.from_stack(stack), "AWS::SecretsManager::Secret") == {}
    assert secrets.api_key.secret_name == API_KEY
    assert secrets.registry_credentials.secret_name == REGISTRY


def test_a_task_reads_the_key_whole_and_the_registry_logins_password() -> None:
    stack, _, secrets = _secrets(create=True)
    assert secrets.for_task("api_key").arn == secrets.api_key.secret_arn
    assert stack.resolve(secrets.for_task("registry_credentials").arn)["Fn::Join"][1][-1] == ":password::"
    with pytest.raises(ValueError, match="unknown secret 'licence'"):
        secrets.for_task("licence")
