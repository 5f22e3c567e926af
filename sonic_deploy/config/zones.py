"""The Regions that exist and the Availability Zones of each, kept as data (aws_zones.json) so that synth
needs no AWS call, and refreshed from the EC2 API on request:

    python -m sonic_deploy.config.zones --refresh     # ec2:DescribeRegions, ec2:DescribeAvailabilityZones

AZ names are mapped per account (your us-west-1a may be another account's us-west-1b, and in us-west-1 an
account sees two of the three), so the list holds every name an account may see; a refresh with your own
credentials lists yours. Only zones of type availability-zone: Local Zones and Wavelength Zones cannot hold
the subnets SageMaker's VpcConfig and the NLB need.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

from sonic_deploy.config.errors import ConfigError

ZONES_FILE = Path(__file__).with_name("aws_zones.json")
REFRESH_COMMAND = "python -m sonic_deploy.config.zones --refresh"


@cache
def known_zones() -> dict[str, tuple[str, ...]]:
    """Region -> its Availability Zone names."""
    data = json.loads(ZONES_FILE.read_text(encoding="utf-8"))
    return {region: tuple(zones) for region, zones in data["regions"].items()}


def availability_zones(ec2: Any) -> list[str]:
    """The AZ names of the client's own Region (zone type availability-zone, every state)."""
    reply = ec2.describe_availability_zones(
        AllAvailabilityZones=True, Filters=[{"Name": "zone-type", "Values": ["availability-zone"]}]
    )
    return sorted(zone["ZoneName"] for zone in reply["AvailabilityZones"])


def refresh(session: Any, target: Path = ZONES_FILE, today: date | None = None) -> dict[str, list[str]]:
    """Ask EC2 (through a boto3 Session) for every Region and, where the account may call it, its AZs; write
    them to `target`. A Region the account has not opted into keeps the zones the file listed (its name is
    still known to exist)."""
    regions = session.client("ec2", region_name="us-east-1").describe_regions(AllRegions=True)["Regions"]
    previous = known_zones()
    zones: dict[str, list[str]] = {}
    for region in sorted(regions, key=lambda r: r["RegionName"]):
        name = region["RegionName"]
        if region.get("OptInStatus") == "not-opted-in":
            zones[name] = list(previous.get(name, ()))
            continue
        zones[name] = availability_zones(session.client("ec2", region_name=name))
    source = (
        f"EC2 DescribeRegions and DescribeAvailabilityZones, {(today or date.today()).isoformat()}; "
        f"refresh with `{REFRESH_COMMAND}`"
    )
    target.write_text(json.dumps({"_source": source, "regions": zones}, indent=2) + "\n", encoding="utf-8")
    known_zones.cache_clear()
    return zones


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sonic_deploy.config.zones",
        description="The Regions and AZs config is checked against.",
    )
    parser.add_argument("--refresh", action="store_true", help="ask the EC2 API and rewrite aws_zones.json")
    args = parser.parse_args(argv)
    if not args.refresh:
        for region, names in known_zones().items():
            print(f"{region}: {' '.join(names)}")
        return 0
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        zones = refresh(boto3.Session())
    except (BotoCoreError, ClientError) as error:
        failure = ConfigError(
            file=ZONES_FILE,
            field="(refresh)",
            value=type(error).__name__,
            problem=f"the EC2 API refused: {error}",
            fix="run with credentials allowed ec2:DescribeRegions and ec2:DescribeAvailabilityZones",
        )
        print(f"sonic-deploy: {failure}", file=sys.stderr)
        return 2
    print(f"{ZONES_FILE}: {len(zones)} Regions, {sum(map(len, zones.values()))} Availability Zones")
    return 0


if __name__ == "__main__":
    sys.exit(main())
