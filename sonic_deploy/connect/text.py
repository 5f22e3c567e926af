"""`sonic-deploy connect`'s human output: the settings, where each comes from, and a snippet per framework."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable

from sonic_deploy.connect import snippets
from sonic_deploy.connect.deployment import Connection, EcsApi, SageMakerEndpoint

DOCS = "docs/connect.md"


def as_text(conn: Connection, framework: str | None) -> str:
    target = conn.target
    if isinstance(target, EcsApi):
        return _ecs(conn, target, [framework] if framework else [*snippets.FRAMEWORKS, "client"])
    return _sagemaker(conn, target, [framework] if framework else [*snippets.FRAMEWORKS, "client"])


def _rows(rows: list[tuple[str, str, str]]) -> list[str]:
    return [f"  {name:<17} {value}  ({source})" for name, value, source in rows]


def _code(code: str) -> list[str]:
    return ["```python", *code.rstrip("\n").split("\n"), "```"]


def _ecs(conn: Connection, api: EcsApi, frameworks: list[str]) -> str:
    lines = [
        f"{conn.stack} in {conn.region}: the ECS route, Cartesia's API behind an internal load balancer.",
        "",
        *_rows(
            [
                ("WebSocket URL", api.websocket_url, "output ApiUrl: pipecat's url"),
                ("HTTP base URL", api.http_base_url, "from ApiUrl: LiveKit's base_url"),
                ("model id", api.model_id, "output ModelId: config ecs.model_id, else sonic_version"),
                ("API version", api.cartesia_version, "output CartesiaVersion: config ecs.cartesia_version"),
                ("API key", api.api_key_secret, "output ApiKeySecret: the secret's name; never read here"),
            ]
        ),
        "",
        "Network: the load balancer is internal: agents reach it from the route's VPC or network.client_cidrs.",
    ]
    ca = snippets.ca_file(api)
    if api.tls:
        how = "" if api.ca_bundle else " (pass --ca-bundle PATH to print the path your agents use)"
        lines.append(
            f"Encryption: TLS ({api.websocket_url.split(':', 1)[0]}://). Agents must trust the CA that signed "
            f"the API's certificate: {ca} below{how}."
        )
    else:
        lines += [
            "Encryption: none. The URL is ws://, plain TCP: the API key and the audio cross the VPC unencrypted.",
            "TLS is off for this environment (ecs.api.tls = false, the default in dev only): to encrypt,",
            f'give [ecs.api] a certificate and deploy again ({DOCS}, "TLS on the load balancer").',
        ]
    lines += [
        "",
        "API key: export it where the agent runs (its role needs secretsmanager:GetSecretValue on the secret,",
        "and kms:Decrypt on the secret's key):",
        f'  export {api.api_key_env}="$({api.api_key_command})"',
    ]
    builders: dict[str, Callable[[EcsApi], str]] = {
        "pipecat": snippets.pipecat_ecs,
        "livekit": snippets.livekit_ecs,
        "client": snippets.client_ecs,
    }
    for framework in frameworks:
        lines += ["", f"## {_title(framework)} (tested with {snippets.TESTED[framework]})", ""]
        lines.append(f"  {snippets.ECS_INSTALL[framework]}")
        if api.tls and framework == "pipecat":
            lines += [
                "",
                "pipecat's service takes no TLS setting: its WebSocket (the websockets library) trusts OpenSSL's",
                "default CA file, which SSL_CERT_FILE replaces for the whole process. Before the agent starts:",
                f"  export SSL_CERT_FILE={shlex.quote(ca)}",
                "If the agent also calls public TLS services (an LLM, speech-to-text), make that file a bundle of",
                f'the public roots and your CA: cat "$(python -m certifi)" {shlex.quote(ca)} > bundle.pem',
            ]
        lines += ["", *_code(builders[framework](api))]
    return "\n".join(lines)


def _sagemaker(conn: Connection, endpoint: SageMakerEndpoint, frameworks: list[str]) -> str:
    arn = (
        endpoint.endpoint_arn or f"arn:aws:sagemaker:{conn.region}:ACCOUNT:endpoint/{endpoint.endpoint_name}"
    )
    rows = [
        ("endpoint name", endpoint.endpoint_name, "output EndpointName"),
        ("Region", conn.region, "output Region"),
        ("endpoint ARN", arn, "from the stack's ARN" if endpoint.endpoint_arn else "put in your account id"),
        (
            "runtime endpoint",
            endpoint.runtime_vpc_endpoint_dns,
            "output RuntimeVpcEndpointDns: for peered VPCs, which do not resolve the private DNS name",
        ),
    ]
    statement = {"Effect": "Allow", "Action": endpoint.iam_action, "Resource": arn}
    lines = [
        f"{conn.stack} in {conn.region}: the SageMaker route, a private endpoint called with AWS credentials.",
        "",
        *_rows(rows),
        "",
        "Credentials: the boto3 chain (the task role or instance profile inside the VPC, AWS_PROFILE on a",
        f"laptop). They need {endpoint.iam_action} on the endpoint:",
        f"  {json.dumps(statement)}",
        "Traffic: HTTPS to the SageMaker runtime (AWS's certificates), through the VPC's interface endpoint.",
    ]
    builders: dict[str, Callable[[SageMakerEndpoint, str], str]] = {
        "pipecat": snippets.pipecat_sagemaker,
        "livekit": snippets.livekit_sagemaker,
        "client": snippets.client_sagemaker,
    }
    for framework in frameworks:
        lines += ["", f"## {_title(framework)}", "", f"  {snippets.SAGEMAKER_INSTALL[framework]}", ""]
        lines += _code(builders[framework](endpoint, conn.region))
    return "\n".join(lines)


def _title(framework: str) -> str:
    return {"pipecat": "pipecat", "livekit": "LiveKit Agents", "client": "Without a framework"}[framework]
