"""The Cartesia API key and registry credentials, in Secrets Manager: imported by name, or created with
placeholder values for you to replace. Never in a template, never a plain environment variable."""

from __future__ import annotations

from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_kms as kms
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from sonic_deploy.constructs.encryption import allow_use_through
from sonic_deploy.constructs.retention import KEEP_ONCE_CREATED

REGISTRY_LOGIN_TEMPLATE = '{"username": "_json_key"}'


class SonicSecrets(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        api_key_name: str,
        registry_credentials_name: str,
        create: bool,
        key: kms.IKey,
    ) -> None:
        super().__init__(scope, construct_id)
        self.api_key: secretsmanager.ISecret
        self.registry_credentials: secretsmanager.ISecret
        if create:
            allow_use_through(key, "secretsmanager")
            # Random placeholders: `aws secretsmanager put-secret-value` replaces them after the deploy.
            self.api_key = secretsmanager.Secret(
                self,
                "ApiKey",
                secret_name=api_key_name,
                encryption_key=key,
                description="Cartesia API key (replace the placeholder)",
                removal_policy=KEEP_ONCE_CREATED,
            )
            self.registry_credentials = secretsmanager.Secret(
                self,
                "RegistryCredentials",
                secret_name=registry_credentials_name,
                encryption_key=key,
                description='{"username": "_json_key", "password": "<service-account JSON>"} from Cartesia',
                generate_secret_string=secretsmanager.SecretStringGenerator(
                    secret_string_template=REGISTRY_LOGIN_TEMPLATE, generate_string_key="password"
                ),
                removal_policy=KEEP_ONCE_CREATED,
            )
        else:
            self.api_key = secretsmanager.Secret.from_secret_name_v2(self, "ApiKey", api_key_name)
            self.registry_credentials = secretsmanager.Secret.from_secret_name_v2(
                self, "RegistryCredentials", registry_credentials_name
            )

    def for_task(self, ref: str) -> ecs.Secret:
        """`api_key`: the key itself; `registry_credentials`: the service-account JSON (its password)."""
        if ref == "api_key":
            return ecs.Secret.from_secrets_manager(self.api_key)
        if ref == "registry_credentials":
            return ecs.Secret.from_secrets_manager(self.registry_credentials, "password")
        raise ValueError(f"unknown secret {ref!r}")
