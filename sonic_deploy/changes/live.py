"""The template CloudFormation holds for a deployed stack (LIVE mode), fetched with get_template."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient


class LiveTemplateError(Exception):
    """The deployed template could not be read; the message says why and what to do."""


def cloudformation_client(region: str) -> CloudFormationClient:
    import boto3  # here: the subcommands that make no AWS call start 0.13 s sooner

    return boto3.client("cloudformation", region_name=region)


def deployed_template(client: CloudFormationClient, stack_name: str) -> dict[str, Any] | None:
    """The template the stack was last deployed with (as submitted); None when the stack does not exist."""
    try:
        response = client.get_template(StackName=stack_name, TemplateStage="Original")
    except NoCredentialsError:
        raise LiveTemplateError(
            "LIVE=1 needs AWS credentials and found none: sign in (`aws sso login --profile NAME` and "
            "`export AWS_PROFILE=NAME`, or the CI's OIDC role), or drop LIVE=1 to diff against the baselines"
        ) from None
    except NoRegionError:  # pragma: no cover - the region always comes from config
        raise LiveTemplateError("no AWS Region: set `region` in the environment's config file") from None
    except ClientError as error:
        message = error.response.get("Error", {}).get("Message", str(error))
        if "does not exist" in message:
            return None
        raise LiveTemplateError(
            f"reading the template of stack {stack_name} failed: {message}. The credentials need "
            "cloudformation:GetTemplate on it (the CDK lookup role has it: "
            "`cdk bootstrap` creates cdk-*-lookup-role-*)"
        ) from None
    except BotoCoreError as error:
        raise LiveTemplateError(f"reading the template of stack {stack_name} failed: {error}") from None
    body: Any = response["TemplateBody"]
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except json.JSONDecodeError:
            raise LiveTemplateError(
                f"stack {stack_name} was deployed from a YAML template, not by this app's `cdk deploy`: "
                "compare it by hand, or redeploy it with `make deploy`"
            ) from None
    if not isinstance(body, dict):
        raise LiveTemplateError(f"stack {stack_name}: the deployed template is not a JSON object")
    return body
