"""`sonic-deploy probe sagemaker`: SageMaker's `InvokeEndpointWithResponseStream`, with either client."""

from __future__ import annotations

from typing import Any

from sonic_deploy.arguments import ENDPOINT_NAME, REGION_NAME, url
from sonic_deploy.probe.arguments import HELP, add_run_options


def add_parser(routes: Any) -> None:
    sagemaker = routes.add_parser(
        "sagemaker", formatter_class=HELP, help="SageMaker InvokeEndpointWithResponseStream"
    )
    sagemaker.add_argument(
        "--endpoint",
        type=ENDPOINT_NAME,
        help="endpoint name (required; with --in-vpc, default: the stack's EndpointName)",
    )
    sagemaker.add_argument("--region", type=REGION_NAME, help="with --in-vpc, default: the stack's Region")
    sagemaker.add_argument(
        "--endpoint-url",
        type=url("http", "https", example="http://127.0.0.1:8080"),
        help="e.g. the reference server, http://127.0.0.1:PORT",
    )
    sagemaker.add_argument(
        "--client",
        choices=("async", "boto3"),
        default="async",
        help="async: boto3's request (endpoint, credentials, headers, SigV4) and error parsing, with aiohttp's "
        "I/O on the event loop; boto3: the boto3 client itself, one thread per request (what a boto3 app sees)",
    )
    add_run_options(sagemaker)
