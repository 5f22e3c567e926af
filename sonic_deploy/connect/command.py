"""`sonic-deploy connect --env NAME --route sagemaker|ecs`: what to put in a voice agent to reach a deployed
route, from its stack's outputs (cloudformation:DescribeStacks, read-only; the API key's secret is named,
never read). Exit codes as preflight's: 2 for config and usage, 1 for AWS and the deployment."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sonic_deploy.arguments import ENVIRONMENT, config_folder
from sonic_deploy.client.trust import CaBundleError, ca_context
from sonic_deploy.config import load_settings, require_config_dir
from sonic_deploy.connect.deployment import ConnectError, EcsApi, connection
from sonic_deploy.connect.snippets import FRAMEWORKS
from sonic_deploy.connect.text import as_text
from sonic_deploy.routes import ROUTES, Wire
from sonic_deploy.stack_outputs import describe_stack

if TYPE_CHECKING:
    from mypy_boto3_cloudformation import CloudFormationClient

PROG = "sonic-deploy connect"
DESCRIBE = "cloudformation:DescribeStacks"
ACCESS_DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"}
REFUSED_CREDENTIALS = {
    "ExpiredToken",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "SignatureDoesNotMatch",
}


def add_parser(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "connect",
        help="print what a voice agent needs to reach a deployed route (read-only)",
        description="Read the deployed stack's outputs (cloudformation:DescribeStacks) and print the settings "
        "and a snippet per framework (pipecat, LiveKit Agents) for a voice agent. The API key is named by its "
        "secret, never read.",
    )
    parser.add_argument("--env", required=True, type=ENVIRONMENT, help="environment in config/environments/")
    parser.add_argument("--route", required=True, choices=tuple(ROUTES), help="the deployed route")
    parser.add_argument(
        "--framework", choices=FRAMEWORKS, help="only this framework's snippet (default: all)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object (for scripts) instead")
    parser.add_argument("--profile", help="AWS profile to use (default: the usual credential chain)")
    parser.add_argument("--config-dir", type=config_folder, default=Path("config"), help="the config/ folder")
    parser.add_argument(
        "--ca-bundle",
        metavar="PATH",
        help="ECS route over TLS: where the agents find the CA that signed the API's certificate (printed "
        "in the snippets; checked here when this machine has the file too)",
    )
    parser.set_defaults(func=run_connect_command)


def cloudformation_client(profile: str | None, region: str) -> CloudFormationClient:
    import boto3

    return boto3.Session(profile_name=profile).client("cloudformation", region_name=region)


def run_connect_command(args: argparse.Namespace) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    require_config_dir(args.config_dir)
    settings = load_settings(args.config_dir, args.env)
    env = settings.environment
    routes = [str(route) for route in env.routes]
    if args.route not in routes:
        return _fail(
            f"environment {settings.environment_name} does not deploy the {args.route} route (routes = "
            f"{json.dumps(routes)} in {args.config_dir / 'environments' / (args.env + '.toml')}). Fix: pass "
            f"--route {' or '.join(routes)}, or add {json.dumps(args.route)} to its routes and deploy it",
            code=2,
        )
    if args.ca_bundle and ROUTES[args.route].wire is not Wire.CARTESIA:
        return _fail(
            "--ca-bundle is for the ECS route's TLS: the SageMaker runtime presents AWS's certificates (boto3 "
            "reads AWS_CA_BUNDLE should a proxy re-sign them). Fix: drop --ca-bundle",
            code=2,
        )
    if args.ca_bundle and Path(args.ca_bundle).exists():
        try:
            ca_context(args.ca_bundle)
        except CaBundleError as error:
            return _fail(f"--ca-bundle: {error}", code=2)
    region = env.region
    stack_name = settings.stack_name(args.route)
    try:
        stack = describe_stack(cloudformation_client(args.profile, region), stack_name)
    except BotoCoreError as error:  # no profile of that name, no credentials, no network
        return _fail(
            f"cannot talk to AWS: {error}. Fix: check --profile, the credentials, the network and that "
            f"{region} is enabled for the account"
        )
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", ""))
        message = str(error.response.get("Error", {}).get("Message", error))
        if code in ACCESS_DENIED:
            return _fail(
                f"not allowed to call {DESCRIBE} on {stack_name} in {region}: {message}. Fix: grant the "
                f"credentials {DESCRIBE} (read-only) on the stack, or pass --profile with a role that has it"
            )
        if code in REFUSED_CREDENTIALS:
            return _fail(
                f"AWS refused the credentials ({code}: {message}). Fix: sign in again (e.g. `aws sso login "
                "--profile NAME`), or check --profile and the AWS_* variables"
            )
        return _fail(
            f"{DESCRIBE} on {stack_name} in {region} failed: {code}: {message}. Fix: retry; if it persists, "
            "check the Region and the AWS Health Dashboard"
        )
    try:
        found = connection(settings.environment_name, args.route, region, stack_name, stack, args.ca_bundle)
    except ConnectError as error:
        return _fail(str(error))
    target = found.target
    if args.ca_bundle and isinstance(target, EcsApi) and not target.tls:
        print(
            f"{PROG}: note: --ca-bundle is unused: the API is at {target.websocket_url}, without TLS",
            file=sys.stderr,
        )
    if args.ca_bundle and isinstance(target, EcsApi) and target.tls and not Path(args.ca_bundle).exists():
        print(
            f"{PROG}: note: {args.ca_bundle} is not on this machine, so it was not checked: put the CA's PEM "
            "file there on the agents' hosts",
            file=sys.stderr,
        )
    print(json.dumps(found.as_json(), indent=2) if args.json else as_text(found, args.framework))
    return 0


def _fail(message: str, code: int = 1) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return code
