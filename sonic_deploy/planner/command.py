"""`sonic-deploy plan`: GPUs and dollars per route for a call volume."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sonic_deploy.arguments import (
    ENVIRONMENT,
    REGION_NAME,
    config_folder,
    input_file,
    name,
    output_file,
    real,
    whole,
)
from sonic_deploy.config import ConfigError, Settings, load_settings
from sonic_deploy.config.errors import MISSING
from sonic_deploy.planner.capacity import HOURS_PER_DAY, Workload
from sonic_deploy.planner.chart import write_chart
from sonic_deploy.planner.costs import Overheads
from sonic_deploy.planner.plan import DEFAULT_INSTANCE_TYPES, build_plan, eks_cluster
from sonic_deploy.planner.price_table import PRICES_FILE, PriceLookup, load_price_table
from sonic_deploy.planner.probe_summary import measured_streams
from sonic_deploy.planner.report import plan_as_json, plan_as_table
from sonic_deploy.routes import ROUTES

DEFAULT_TTFA_BUDGET_MS = 300.0
_SHARE = real(0, 1, "a share", low_open=True)
_HOURS = real(0, HOURS_PER_DAY, "hours a day")
# EC2 and SageMaker instance types: family.size, SageMaker's with ml. in front (g6e.xlarge, ml.g6e.2xlarge).
_INSTANCE_TYPE = name(r"(ml\.)?[a-z][a-z0-9-]*\.[a-z0-9]+", "an instance type", "g6e.xlarge or ml.g6e.xlarge")


class _HelpWithDefaults(argparse.ArgumentDefaultsHelpFormatter):
    """Show defaults, except the empty ones (None, False) that the help text already explains."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def add_parser(subparsers: Any) -> None:
    defaults = Workload()
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "plan",
        help="GPUs and dollars per route for your call volume",
        description=f"Instances and cost per route ({', '.join(route.title for route in ROUTES.values())}) "
        "and instance type for a call volume. Every input has a default: `sonic-deploy plan` alone plans 100 "
        "concurrent calls.",
        formatter_class=_HelpWithDefaults,
    )
    parser.add_argument(
        "--env",
        type=ENVIRONMENT,
        help="environment in config/environments/ (Region, catalogue, Sonic version); default: dev",
    )
    parser.add_argument("--config-dir", type=config_folder, default="config", help="the config/ folder")
    parser.add_argument("--region", type=REGION_NAME, help="Region to price; default: the environment's")
    parser.add_argument(
        "--instance-types",
        nargs="+",
        type=_INSTANCE_TYPE,
        metavar="TYPE",
        help="types to compare; ml.* types are the SageMaker route, the others ECS and, one-GPU types, EKS "
        "(default: "
        f"{' '.join(DEFAULT_INSTANCE_TYPES)} and the environment's sagemaker.capacity.fallback_types)",
    )
    load = parser.add_argument_group("call volume")
    load.add_argument(
        "--peak-calls",
        type=whole(1, 10_000_000, "concurrent calls"),
        default=defaults.peak_calls,
        help="concurrent calls at peak",
    )
    load.add_argument(
        "--speaking-share",
        type=_SHARE,
        default=defaults.speaking_share,
        help="share of a call during which the agent speaks",
    )
    load.add_argument(
        "--utterance-seconds",
        type=real(0, 3600, "seconds", low_open=True),
        default=defaults.utterance_seconds,
        help="average length of one agent utterance",
    )
    load.add_argument(
        "--rtf",
        type=_SHARE,
        default=defaults.rtf,
        help="share of an utterance's length that its stream holds a GPU slot (1 = paced audio)",
    )
    load.add_argument(
        "--target-utilisation",
        type=_SHARE,
        default=defaults.target_utilisation,
        help="share of instance capacity to fill",
    )
    load.add_argument("--peak-hours", type=_HOURS, default=defaults.peak_hours, help="hours a day at peak")
    load.add_argument(
        "--offpeak-hours",
        type=_HOURS,
        default=defaults.offpeak_hours,
        help="hours a day off-peak (the rest of 24 runs the minimum, with no calls)",
    )
    load.add_argument(
        "--offpeak-share",
        type=real(0, 1, "a share"),
        default=defaults.offpeak_share,
        help="off-peak concurrent calls as a share of peak",
    )
    probe = parser.add_argument_group("measured concurrency")
    probe.add_argument(
        "--probe",
        type=input_file("a probe run's summary.json (OUT/summary.json)"),
        metavar="SUMMARY_JSON",
        help="a probe run's summary.json, taken against ONE instance of --probe-instance-type",
    )
    probe.add_argument(
        "--probe-instance-type",
        type=_INSTANCE_TYPE,
        metavar="TYPE",
        help="the instance type the probe measured",
    )
    probe.add_argument(
        "--ttfa-budget-ms",
        type=real(0, 60_000, "milliseconds", low_open=True),
        default=DEFAULT_TTFA_BUDGET_MS,
        help="highest time-to-first-audio p95 a level may have (not applied to a `probe --slo` summary "
        "with an answer: its search's objective decides)",
    )
    output = parser.add_argument_group("output")
    output.add_argument("--json", action="store_true", help="print JSON instead of a table")
    output.add_argument(
        "--plot",
        type=output_file("the chart (PNG)"),
        metavar="FILE.png",
        help="also draw monthly cost per option",
    )
    output.add_argument(
        "--refresh-prices",
        action="store_true",
        help=f"first fetch current prices from AWS into config/{PRICES_FILE} (needs credentials)",
    )
    output.add_argument(
        "--price-reservation",
        action="store_true",
        help="price sagemaker.capacity.ml_reservation_arn's training plan (DescribeTrainingPlan; needs credentials)",
    )
    output.add_argument("--profile", help="AWS profile for --refresh-prices and --price-reservation")
    parser.set_defaults(func=run_plan, check=check_plan, command_parser=parser)


def _workload(args: argparse.Namespace) -> Workload:
    return Workload(
        peak_calls=args.peak_calls,
        speaking_share=args.speaking_share,
        utterance_seconds=args.utterance_seconds,
        rtf=args.rtf,
        target_utilisation=args.target_utilisation,
        peak_hours=args.peak_hours,
        offpeak_hours=args.offpeak_hours,
        offpeak_share=args.offpeak_share,
    )


def check_plan(args: argparse.Namespace) -> str | None:
    """The options together: the call volume's figures, and --probe with the type it measured."""
    _workload(args)  # a ConfigError names the option
    # Without --instance-types the list also holds the environment's fallback types: run_plan checks then.
    types = args.instance_types
    if args.probe is not None and types is not None and args.probe_instance_type not in types:
        given = "no --probe-instance-type" if args.probe_instance_type is None else "--probe-instance-type "
        given += args.probe_instance_type or ""
        return (
            f"--probe with {given}: it must name the instance type the probe measured, one of --instance-types. "
            f"Fix: add --probe-instance-type with one of {', '.join(types)}"
        )
    if args.probe is None and args.probe_instance_type is not None:
        return "--probe-instance-type without --probe: it names what a probe measured. Fix: add --probe or drop it"
    return None


def run_plan(args: argparse.Namespace) -> int:
    config_dir: Path = args.config_dir
    # argparse's types checked the folder (config_folder) and --region (REGION_NAME); the loader, the
    # environment's own Region.
    settings = load_settings(config_dir, args.env)
    region = args.region or settings.environment.region
    workload = _workload(args)
    measured = None
    if args.probe is not None:
        measured = (args.probe_instance_type, measured_streams(args.probe, args.ttfa_budget_ms))
    # Each type the endpoint may fall back to is priced beside the first (docs/capacity.md, SageMaker).
    fallbacks = settings.environment.sagemaker.capacity.fallback_types
    types = list(dict.fromkeys(args.instance_types or [*DEFAULT_INSTANCE_TYPES, *fallbacks]))
    if args.probe is not None and args.probe_instance_type not in types:
        raise ConfigError(
            file="command line",
            field="--probe-instance-type",
            value=args.probe_instance_type,
            problem="not one of the types planned (the default list and the environment's "
            "sagemaker.capacity.fallback_types)",
            fix=f"use one of {', '.join(types)}, or name the types with --instance-types",
        )
    prices_file = config_dir / PRICES_FILE
    system_types = [eks_cluster(settings)[0].system_instance_type]
    if args.refresh_prices and not _refresh(args, types, system_types, prices_file, region):
        return 1
    today = datetime.now(UTC).date()
    table = load_price_table(config_dir)
    plan = build_plan(
        settings,
        table,
        prices_file,
        workload,
        region,
        types,
        Overheads(),
        today,
        measured,
    )
    if args.price_reservation:
        note = _reservation_note(args, settings, region, PriceLookup(table, prices_file, region))
        if note is None:
            return 1
        plan = dataclasses.replace(plan, notes=[*plan.notes, note])
    if args.plot is not None:
        write_chart(plan, args.plot)
    print(json.dumps(plan_as_json(plan), indent=2) if args.json else plan_as_table(plan))
    return 0


def _refresh(
    args: argparse.Namespace, types: list[str], system_types: list[str], prices_file: Path, region: str
) -> bool:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from sonic_deploy.planner.price_refresh import PRICING_API_REGION, fetch_eks_prices, fetch_prices
    from sonic_deploy.planner.price_table_writer import write_price_table

    try:
        session = boto3.Session(profile_name=args.profile)
        pricing = session.client("pricing", region_name=PRICING_API_REGION)
        today = datetime.now(UTC).date()
        found, problems = fetch_prices(
            pricing, session.client("ec2", region_name=region), region, types, today
        )
        # The EKS rows' own: the control plane and the system nodes' type (On-Demand only).
        eks_found, eks_problems = fetch_eks_prices(pricing, region, system_types, today)
        found, problems = found + eks_found, problems + eks_problems
    except (BotoCoreError, ClientError) as error:
        print(
            f"sonic-deploy plan: could not fetch prices: {error}. Fix: run with AWS credentials allowed "
            "pricing:GetProducts and ec2:DescribeSpotPriceHistory (e.g. --profile NAME), or plan without "
            "--refresh-prices",
            file=sys.stderr,
        )
        return False
    if found:
        write_price_table(prices_file, found)
    for price in found:
        print(
            f"refreshed {price.kind} {price.instance_type} in {price.region}: ${price.row.usd:g}/hour",
            file=sys.stderr,
        )
    for problem in problems:
        print(f"not refreshed: {problem}", file=sys.stderr)
    return True


def _reservation_note(
    args: argparse.Namespace, settings: Settings, region: str, prices: PriceLookup
) -> str | None:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    from sonic_deploy.planner.reservation import describe, reservation_note

    arn = settings.environment.sagemaker.capacity.ml_reservation_arn
    if arn is None:
        raise ConfigError(
            file=settings.config_dir / "environments" / f"{settings.environment_name}.toml",
            field="sagemaker.capacity.ml_reservation_arn",
            value=MISSING,
            problem="not set: --price-reservation has no training plan to price",
            fix="set it (docs/capacity.md, SageMaker), or plan without --price-reservation",
        )
    try:
        sagemaker = boto3.Session(profile_name=args.profile).client(
            "sagemaker", region_name=arn.split(":")[3]
        )
        reservation = describe(sagemaker, arn)
    except (BotoCoreError, ClientError) as error:
        print(
            f"sonic-deploy plan: could not read the training plan: {error}. Fix: run with AWS credentials "
            "allowed sagemaker:DescribeTrainingPlan (e.g. --profile NAME), or plan without --price-reservation",
            file=sys.stderr,
        )
        return None

    def on_demand(instance_type: str) -> float | None:
        row = prices.instance("sagemaker_hosting", instance_type)
        return row.usd if row is not None else None

    return reservation_note(reservation, on_demand)
