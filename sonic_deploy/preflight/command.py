"""`sonic-deploy preflight --env NAME`: will the deployment work in this account today?"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from sonic_deploy.arguments import ENVIRONMENT, config_folder
from sonic_deploy.config import load_settings, require_config_dir
from sonic_deploy.config.placeholders import refusal
from sonic_deploy.preflight.after_deploy import after_deploy
from sonic_deploy.preflight.before_deploy import before_deploy
from sonic_deploy.preflight.results import CheckResult
from sonic_deploy.preflight.runner import AwsClients, run_preflight
from sonic_deploy.routes import ROUTES

MARKS = {"pass": "PASS", "fail": "FAIL", "skipped": "SKIP"}


def add_parser(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "preflight",
        help="check the account before you deploy (real, read-only AWS calls)",
        description="Check with your AWS credentials that an environment can deploy: account, Marketplace "
        "subscription, quotas, instance offering, CDK bootstrap, ECS images and secrets; with --after-deploy, "
        "what only the deployed route shows. Exits 1 if a check fails.",
    )
    parser.add_argument("--env", required=True, type=ENVIRONMENT, help="environment in config/environments/")
    parser.add_argument("--config-dir", type=config_folder, default=Path("config"), help="the config/ folder")
    parser.add_argument("--profile", help="AWS profile to use (default: the usual credential chain)")
    parser.add_argument("--json", action="store_true", help="print JSON (for CI) instead of a table")
    only = parser.add_mutually_exclusive_group()
    only.add_argument(
        "--before-deploy",
        metavar="ROUTE",
        choices=tuple(ROUTES),
        help="only what a deploy of ROUTE fails on minutes in (Docker; the ECS secrets): `make deploy` runs it",
    )
    only.add_argument(
        "--after-deploy",
        metavar="ROUTE",
        choices=tuple(ROUTES),
        help="only what the deployed ROUTE shows once it has served traffic (SageMaker: the endpoint's instance "
        "pools, their metrics, the scaling alarms)",
    )
    parser.set_defaults(func=run_preflight_command)


def run_preflight_command(args: argparse.Namespace) -> int:
    import boto3
    from botocore.exceptions import BotoCoreError

    require_config_dir(args.config_dir)
    settings = load_settings(args.config_dir, args.env)
    deployed = [str(route) for route in settings.environment.routes]
    if args.after_deploy and args.after_deploy not in deployed:
        print(
            f"sonic-deploy preflight: --after-deploy {args.after_deploy}: environment {args.env} does not deploy "
            f"that route (routes = {json.dumps(deployed)} in {args.config_dir / 'environments' / args.env}.toml). "
            f"Fix: pass --after-deploy {' or '.join(deployed)}",
            file=sys.stderr,
        )
        return 2
    only = args.before_deploy or args.after_deploy
    routes = [only] if only else settings.environment.routes
    refused = refusal(settings.environment_name, settings.placeholders, routes)
    if refused is not None:
        # Checked before any AWS call: the answers would be about a deployment that cannot happen.
        print(f"sonic-deploy preflight: {refused}", file=sys.stderr)
        return 2
    region = settings.environment.region
    try:
        session = boto3.Session(profile_name=args.profile)
        if args.before_deploy:
            results = before_deploy(
                settings,
                args.before_deploy,
                docker=os.environ.get("CDK_DOCKER") or "docker",
                secretsmanager=session.client("secretsmanager", region_name=region),
            )
        elif args.after_deploy:
            results = after_deploy(AwsClients.from_session(session, region), settings, args.after_deploy)
        else:
            results = run_preflight(AwsClients.from_session(session, region), settings)
    except BotoCoreError as error:  # no profile of that name, no network, an endpoint missing in the Region
        print(
            f"sonic-deploy preflight: cannot talk to AWS: {error}. Fix: check --profile, the network and "
            f"that {region} is enabled for the account",
            file=sys.stderr,
        )
        return 1
    print(
        preflight_as_json(args.env, region, results)
        if args.json
        else preflight_as_table(args.env, region, results)
    )
    return 1 if any(result.status == "fail" for result in results) else 0


def preflight_as_json(environment: str, region: str, results: list[CheckResult]) -> str:
    return json.dumps(
        {
            "environment": environment,
            "region": region,
            "ok": not any(result.status == "fail" for result in results),
            "checks": [result.__dict__ for result in results],
        },
        indent=2,
    )


def preflight_as_table(environment: str, region: str, results: list[CheckResult]) -> str:
    lines = [f"Preflight for {environment} in {region}:"]
    for result in results:
        lines.append(f"  {MARKS[result.status]}  {result.check}: {result.detail}")
        if result.fix:
            lines.append(f"        fix: {result.fix}")
    failures = sum(result.status == "fail" for result in results)
    lines.append(f"{failures} check(s) failed." if failures else "All checks passed or were skipped.")
    return "\n".join(lines)
