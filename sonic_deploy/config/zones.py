"""The Regions that exist and the Availability Zones of each, kept as data (aws_zones.json) so that synth
needs no AWS call, and refreshed from the EC2 API on request:

    python -m sonic_deploy.config.zones --refresh     # ec2:DescribeRegions, ec2:DescribeAvailabilityZones

Refusing a real AZ blocks a user; accepting a name AWS does not have only fails later, at deploy. So the
list holds every name any account may see, not one account's view. Sources (checked 2026-12-01):

- AWS Regions and Availability Zones, "AWS Availability Zones"
  (docs.aws.amazon.com/global-infrastructure/latest/regions/aws-availability-zones.html): each Region's AZ
  IDs; an AZ's name is its Region code and a letter; "for accounts created before November 2025, in our
  oldest Regions, we independently map Availability Zones to codes for each AWS account".
- "AZ IDs" (.../regions/az-ids.html): the mapping is per account in the Regions opened before November 2012,
  uniform in the later ones. So in us-east-1, us-west-1, us-west-2, eu-west-1, ap-northeast-1,
  ap-southeast-1, ap-southeast-2 and sa-east-1 an older account may see letters a newer one does not: Tokyo
  has three AZ IDs in use, yet older accounts see ap-northeast-1b beside a, c and d (describe-availability-
  zones output of such accounts, e.g. gist.github.com/tnir/c54bf97ed93b5c6ccf714bc3958f47f3); us-west-1
  shows two of a, b and c depending on the account. Each Region's list therefore runs from a to the last
  letter any account is known to see, gaps included (ca-central-1c, cn-north-1c: retired or never issued
  to new accounts, kept for the accounts that still have them).
- botocore's data/endpoints.json, for the Regions of each partition: aws, aws-cn (cn-*), aws-us-gov
  (us-gov-*) and aws-eusc, the AWS European Sovereign Cloud (eusc-de-east-1, Brandenburg, opened January
  2026; its regionRegex: eusc, then de, a word and a number). The isolated partitions (us-iso-*, us-isob-*,
  eu-isoe-*, us-isof-*) are left out: their zones are not published, and their users refresh the list.

A refresh adds the names the caller's account sees and keeps every name and Region already listed (one
account's view would drop another's letters, and DescribeRegions lists one partition only). Only zones of
type availability-zone: Local Zones and Wavelength Zones cannot hold the subnets SageMaker's VpcConfig and
the NLB need.
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
    return known_zones_in(ZONES_FILE)


def known_zones_in(path: Path) -> dict[str, tuple[str, ...]]:
    """The Regions and zones a zone file lists."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return {region: tuple(zones) for region, zones in data["regions"].items()}


def availability_zones(ec2: Any) -> list[str]:
    """The AZ names of the client's own Region (zone type availability-zone, every state)."""
    reply = ec2.describe_availability_zones(
        AllAvailabilityZones=True, Filters=[{"Name": "zone-type", "Values": ["availability-zone"]}]
    )
    return sorted(zone["ZoneName"] for zone in reply["AvailabilityZones"])


def refresh(session: Any, target: Path = ZONES_FILE, today: date | None = None) -> dict[str, list[str]]:
    """Ask EC2 (through a boto3 Session) for every Region and, where the account may call it, its AZs, and
    add them to `target`'s list: names and Regions already listed are kept (another account may see
    letters this one does not; DescribeRegions lists this partition's Regions only)."""
    regions = session.client("ec2", region_name="us-east-1").describe_regions(AllRegions=True)["Regions"]
    previous = known_zones_in(target) if target.is_file() else known_zones()
    zones: dict[str, list[str]] = {name: list(names) for name, names in previous.items()}
    for region in sorted(regions, key=lambda r: r["RegionName"]):
        name = region["RegionName"]
        seen = set(zones.get(name, ()))
        if region.get("OptInStatus") != "not-opted-in":
            seen.update(availability_zones(session.client("ec2", region_name=name)))
        zones[name] = sorted(seen)
    zones = dict(sorted(zones.items()))
    source = (
        f"the list before, with EC2 DescribeRegions and DescribeAvailabilityZones added, "
        f"{(today or date.today()).isoformat()}; refresh with `{REFRESH_COMMAND}`"
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
