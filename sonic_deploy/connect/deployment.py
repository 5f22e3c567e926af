"""What a voice agent needs to reach one deployed route, read from its stack's outputs (never from a secret:
the API key is named, not read)."""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

from sonic_deploy.routes import ROUTES, Wire
from sonic_deploy.routes.ecs import outputs as ecs_outputs
from sonic_deploy.routes.sagemaker import outputs as sagemaker_outputs
from sonic_deploy.stack_outputs import DeployedStack

API_KEY_ENV = "CARTESIA_API_KEY"
INVOKE_ACTION = "sagemaker:InvokeEndpointWithResponseStream"
WEBSOCKET_PATH = "/tts/websocket"
# Statuses in which a stack's outputs are not those of a working deployment (a first create that has not
# finished or failed, a delete): anything else has the outputs of its last successful deploy.
NOT_READY = frozenset(
    {
        "CREATE_IN_PROGRESS",
        "CREATE_FAILED",
        "ROLLBACK_IN_PROGRESS",
        "ROLLBACK_FAILED",
        "ROLLBACK_COMPLETE",
        "DELETE_IN_PROGRESS",
        "DELETE_FAILED",
        "DELETE_COMPLETE",
        "REVIEW_IN_PROGRESS",
    }
)


class ConnectError(Exception):
    """The deployment cannot be described to an agent; the message says why and what to do."""


@dataclass(frozen=True)
class EcsApi:
    """The ECS route: Cartesia's API behind the internal load balancer."""

    websocket_url: str
    """The full WebSocket URL (stack output ApiUrl): pipecat's `url`."""
    http_base_url: str
    """The same host as http(s)://, without a path: LiveKit's `base_url` (it makes the ws(s):// URL itself)."""
    model_id: str
    cartesia_version: str
    api_key_secret: str
    """The Secrets Manager name of the API key: its value is never read here."""
    api_key_env: str
    api_key_command: str
    tls: bool
    ca_bundle: str | None


@dataclass(frozen=True)
class SageMakerEndpoint:
    """The SageMaker route: the endpoint, invoked with the caller's AWS credentials."""

    endpoint_name: str
    endpoint_arn: str | None
    """None when the stack's ARN does not show the account (then the IAM policy names it by hand)."""
    runtime_vpc_endpoint_dns: str
    iam_action: str


@dataclass(frozen=True)
class Connection:
    environment: str
    route: str
    stack: str
    region: str
    target: EcsApi | SageMakerEndpoint

    def as_json(self) -> dict[str, Any]:
        """Stable keys for scripts: environment, route, stack, region, settings (the target's fields)."""
        return {
            "environment": self.environment,
            "route": self.route,
            "stack": self.stack,
            "region": self.region,
            "settings": asdict(self.target),
        }


def connection(
    environment: str,
    route: str,
    region: str,
    stack_name: str,
    stack: DeployedStack | None,
    ca_bundle: str | None,
) -> Connection:
    """The route's settings from the deployed stack (None: not deployed), or ConnectError naming what is
    wrong and the fix."""
    deploy = f"cdk deploy {ROUTES[route].stack_id} -c env={environment} (make deploy ENV={environment} ROUTE={route})"
    if stack is None:
        raise ConnectError(
            f"{stack_name} is not deployed in {region}: CloudFormation has no stack of that name there. "
            f"Fix: {deploy}; or pick the environment (--env) it was deployed as"
        )
    if stack.status in NOT_READY:
        raise ConnectError(
            f"stack {stack.name} is {stack.status}: it has no working deployment to connect to. Fix: "
            f"read its events in the CloudFormation console; once it is deleted or deployed again ({deploy}), "
            "run connect again"
        )
    missing = stack.missing(ROUTES[route].connect_outputs)
    if missing:
        raise ConnectError(
            f"stack {stack.name} has no output {', '.join(missing)}: it was deployed by an older sonic-deploy. "
            f"Fix: deploy it again with this one: {deploy}"
        )
    outputs = stack.outputs
    region = outputs[
        ecs_outputs.REGION
    ]  # where it was deployed, as the stack says (the config's, unless edited since)
    target: EcsApi | SageMakerEndpoint
    if ROUTES[route].wire is Wire.CARTESIA:
        websocket_url, http_base_url = api_urls(outputs[ecs_outputs.API_URL], stack.name)
        secret = outputs[ecs_outputs.API_KEY_SECRET]
        target = EcsApi(
            websocket_url=websocket_url,
            http_base_url=http_base_url,
            model_id=outputs[ecs_outputs.MODEL_ID],
            cartesia_version=outputs[ecs_outputs.CARTESIA_VERSION],
            api_key_secret=secret,
            api_key_env=API_KEY_ENV,
            api_key_command=api_key_command(secret, region),
            tls=websocket_url.startswith("wss://"),
            ca_bundle=ca_bundle,
        )
    else:
        name = outputs[sagemaker_outputs.ENDPOINT_NAME]
        target = SageMakerEndpoint(
            endpoint_name=name,
            endpoint_arn=_endpoint_arn(stack, region, name),
            runtime_vpc_endpoint_dns=outputs[sagemaker_outputs.RUNTIME_VPC_ENDPOINT_DNS],
            iam_action=INVOKE_ACTION,
        )
    return Connection(environment, route, stack.name, region, target)


def api_urls(api_url: str, stack_name: str) -> tuple[str, str]:
    """ApiUrl (ws[s]://HOST:PORT[/prefix]/tts/websocket) as pipecat's full URL and LiveKit's http(s) base.
    The base has no trailing slash: both frameworks append `/tts/...` to it as it is."""
    parts = urlsplit(api_url)
    if parts.scheme not in ("ws", "wss") or not parts.hostname or not parts.path.endswith(WEBSOCKET_PATH):
        raise ConnectError(
            f"stack {stack_name}: output ApiUrl = {api_url!r} is not a ws:// or wss:// URL ending in "
            f"{WEBSOCKET_PATH}. Fix: deploy the stack again with this sonic-deploy"
        )
    prefix = parts.path.removesuffix(WEBSOCKET_PATH).rstrip("/")
    http = "https" if parts.scheme == "wss" else "http"
    return f"{parts.scheme}://{parts.netloc}{parts.path}", f"{http}://{parts.netloc}{prefix}"


def api_key_command(secret: str, region: str) -> str:
    """The AWS CLI command that prints the key (run where the agent runs; this tool never runs it)."""
    return (
        f"aws secretsmanager get-secret-value --secret-id {shlex.quote(secret)} --query SecretString "
        f"--output text --region {shlex.quote(region)}"
    )


def _endpoint_arn(stack: DeployedStack, region: str, endpoint_name: str) -> str | None:
    owner = stack.partition_and_account
    if owner is None:
        return None
    partition, account = owner
    # SageMaker writes endpoint names in lower case in their ARNs, which IAM matches case-sensitively
    # (seen in the field: prometheus-community/yet-another-cloudwatch-exporter#1178, "Resource ARN is only
    # in lower case"; awslabs/service-workbench-on-aws#1177 made its SageMaker policies case-insensitive).
    return f"arn:{partition}:sagemaker:{region}:{account}:endpoint/{endpoint_name.lower()}"
