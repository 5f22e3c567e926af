"""ImageRegistry: the image copy's own role (pushes into this stack's repositories only), its encrypted log
group, and images pinned by digest from the copy to the task definition."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import App, Environment, Stack
from aws_cdk import aws_kms as kms
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk.assertions import Template

from sonic_deploy.constructs.registry import PUSH_ACTIONS, ImageRegistry, ImageSource
from tests.cdk_context import cli_context
from tests.conftest import EditConfig, rendered, resources_of, synthesize_from

DIGEST = "sha256:" + "0123456789abcdef" * 4
PRIVATE = ImageSource(
    "europe-docker.pkg.dev/cartesia/self-hosted/gpu-worker", "1.0.0", "sonic-test/gpu-worker"
)
PUBLIC = ImageSource("public.ecr.aws/docker/library/nats", "2.10-alpine", "sonic-test/nats", private=False)
LOGIN_ACTIONS = {"ecr:GetAuthorizationToken", "ecr-public:GetAuthorizationToken", "sts:GetServiceBearerToken"}


def _registry_template(
    images: dict[str, ImageSource], *, secret_key: bool = False, log_retention_days: int = 30
) -> Template:
    stack = Stack(
        App(context=cli_context()), "Test", env=Environment(account="111111111111", region="us-east-2")
    )
    key = kms.Key(stack, "Key")
    secret = (
        secretsmanager.Secret(stack, "Login", secret_name="sonic/test/registry", encryption_key=key)
        if secret_key
        else secretsmanager.Secret.from_secret_name_v2(stack, "Login", "sonic/test/registry")
    )
    ImageRegistry(
        stack,
        "Registry",
        images=images,
        key=key,
        registry_credentials=secret,
        copy_images=True,
        copy_log_retention_days=log_retention_days,
    )
    return Template.from_stack(stack)


def _copy_role(template: Template) -> str:
    (role,) = [k for k in resources_of(template, "AWS::IAM::Role") if k.startswith("RegistryCopyRole")]
    return role


def _statements_on(template: Template, role: str) -> dict[str, list[dict[str, Any]]]:
    """Every policy that grants the role anything, by logical id: its statements."""
    granting: dict[str, list[dict[str, Any]]] = {}
    for kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        for key, policy in resources_of(template, kind).items():
            if {"Ref": role} in policy["Properties"].get("Roles", []):
                granting[key] = policy["Properties"]["PolicyDocument"]["Statement"]
    return granting


def _by_sid(statements: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["Sid"]: {k: v for k, v in s.items() if k != "Sid"} for s in statements}


def test_the_copy_runs_with_its_own_role_and_only_its_statements() -> None:
    template = _registry_template({"gpu_worker": PRIVATE, "nats": PUBLIC})
    role = _copy_role(template)
    (copier,) = resources_of(template, "AWS::Lambda::Function").values()
    assert copier["Properties"]["Role"] == {"Fn::GetAtt": [role, "Arn"]}
    # No AWS managed policy (AWSLambdaBasicExecutionRole) and no inline policy on the role.
    assert set(resources_of(template, "AWS::IAM::Role")[role]["Properties"]) == {
        "AssumeRolePolicyDocument",
        "Description",
    }
    granting = _statements_on(template, role)
    # Two policies of ours, no inline policy (what cdk-ecr-deployment adds to a role it may update).
    assert sorted(granting) == sorted(resources_of(template, "AWS::IAM::ManagedPolicy"))
    assert len(granting) == 2
    assert not resources_of(template, "AWS::IAM::Policy")
    (push,) = [v for k, v in granting.items() if k.startswith("RegistryCopyPolicy")]
    (login,) = [v for k, v in granting.items() if k.startswith("RegistryCopyLoginPolicy")]
    (log_group,) = resources_of(template, "AWS::Logs::LogGroup")
    assert _by_sid(push) == {
        "PushIntoThisStacksRepositories": {
            "Action": PUSH_ACTIONS,
            "Effect": "Allow",
            "Resource": [
                {"Fn::GetAtt": [k, "Arn"]} for k in sorted(resources_of(template, "AWS::ECR::Repository"))
            ],
        },
        "WriteItsOwnLogs": {
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
            "Effect": "Allow",
            "Resource": {"Fn::GetAtt": [log_group, "Arn"]},
        },
        "ReadTheRegistryLogin": {
            "Action": "secretsmanager:GetSecretValue",
            "Effect": "Allow",
            # Imported by name: its ARN is partial, the suffix Secrets Manager appends is matched.
            "Resource": "arn:aws:secretsmanager:us-east-2:111111111111:secret:sonic/test/registry-??????",
        },
    }
    assert _by_sid(login) == {
        "EcrLoginHasNoResourceLevelPermission": {
            "Action": "ecr:GetAuthorizationToken",
            "Effect": "Allow",
            "Resource": "*",
        },
        "EcrPublicLoginHasNoResourceLevelPermission": {
            "Action": ["ecr-public:GetAuthorizationToken", "sts:GetServiceBearerToken"],
            "Effect": "Allow",
            "Resource": "*",
        },
    }


def test_nothing_but_a_login_on_every_resource() -> None:
    template = _registry_template({"gpu_worker": PRIVATE, "nats": PUBLIC})
    for statements in _statements_on(template, _copy_role(template)).values():
        for statement in statements:
            if statement["Resource"] == "*":
                actions = (
                    statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                )
                assert set(actions) <= LOGIN_ACTIONS, statement
    assert "s3:GetObject" not in template.to_json().__repr__()


def test_no_ecr_public_login_without_a_public_source() -> None:
    template = _registry_template({"gpu_worker": PRIVATE})
    statements = [s for v in _statements_on(template, _copy_role(template)).values() for s in v]
    assert "sts:GetServiceBearerToken" not in json.dumps(statements)
    assert "EcrPublicLoginHasNoResourceLevelPermission" not in json.dumps(statements)


def test_a_secret_with_our_key_is_decrypted_only_through_secrets_manager() -> None:
    template = _registry_template({"gpu_worker": PRIVATE}, secret_key=True)
    statements = [s for v in _statements_on(template, _copy_role(template)).values() for s in v]
    (decrypt,) = [s for s in statements if s.get("Sid") == "DecryptTheRegistryLogin"]
    (key,) = resources_of(template, "AWS::KMS::Key")
    assert decrypt["Action"] == "kms:Decrypt"
    assert decrypt["Resource"] == {"Fn::GetAtt": [key, "Arn"]}
    assert decrypt["Condition"] == {
        "StringEquals": {"kms:ViaService": "secretsmanager.us-east-2.amazonaws.com"}
    }


def test_no_copy_runs_before_its_permissions() -> None:
    template = _registry_template({"gpu_worker": PRIVATE, "nats": PUBLIC})
    policies = sorted(resources_of(template, "AWS::IAM::ManagedPolicy"))
    for copy in resources_of(template, "Custom::CDKECRDeployment").values():
        assert sorted(copy["DependsOn"]) == policies


def test_copy_logs_encrypted_with_the_stacks_key_and_kept_as_configured() -> None:
    template = _registry_template({"gpu_worker": PRIVATE}, log_retention_days=90)
    (group,) = resources_of(template, "AWS::Logs::LogGroup").values()
    (key,) = resources_of(template, "AWS::KMS::Key")
    assert group["Properties"]["KmsKeyId"] == {"Fn::GetAtt": [key, "Arn"]}
    assert group["Properties"]["RetentionInDays"] == 90
    assert group["DeletionPolicy"] == "RetainExceptOnCreate"


def test_what_remains_on_the_copying_lambda_is_skipped_with_reasons() -> None:
    template = _registry_template({"gpu_worker": PRIVATE, "nats": PUBLIC})
    (copier,) = resources_of(template, "AWS::Lambda::Function").values()
    skips = copier["Metadata"]["checkov"]["skip"]
    assert {s["id"] for s in skips} == {"CKV_AWS_115", "CKV_AWS_116", "CKV_AWS_117"}
    assert all(len(s["comment"]) > 40 for s in skips)
    (login,) = [p for k, p in resources_of(template, "AWS::IAM::ManagedPolicy").items() if "Login" in k]
    assert [s["id"] for s in login["Metadata"]["checkov"]["skip"]] == ["CKV_AWS_107"]


def test_a_digest_pins_the_copy_and_the_task(edit_config: EditConfig) -> None:
    config = edit_config(
        "environments/dev.toml",
        'source = "REPLACE-ME.pkg.dev/cartesia/self-hosted/gpu-worker"\ntag = "REPLACE-ME"',
        f'source = "REPLACE-ME.pkg.dev/cartesia/self-hosted/gpu-worker"\ntag = "REPLACE-ME"\ndigest = "{DIGEST}"',
    )
    template = Template.from_stack(synthesize_from(config, routes=["ecs"])["ecs"])
    (copy,) = [c for k, c in resources_of(template, "Custom::CDKECRDeployment").items() if "GpuWorker" in k]
    assert (
        copy["Properties"]["SrcImage"]
        == f"docker://REPLACE-ME.pkg.dev/cartesia/self-hosted/gpu-worker@{DIGEST}"
    )
    # Into the repository under its (immutable) tag: an untagged image would expire with the lifecycle rule.
    assert rendered(copy["Properties"]["DestImage"]).endswith("/CFN_Ref:REPLACE-ME")
    (worker,) = [
        d
        for t in resources_of(template, "AWS::ECS::TaskDefinition").values()
        for d in t["Properties"]["ContainerDefinitions"]
        if d["Name"] == "gpu-worker"
    ]
    assert rendered(worker["Image"]).endswith(f"/CFN_Ref@{DIGEST}")
