"""The one rule for an AWS Region's name (the config's `region` and every command's Region option), and the
partition a Region is in."""

from __future__ import annotations

import re

from sonic_deploy.config.zones import REFRESH_COMMAND, known_zones

# A Region code: partition prefix, geography, number (botocore's endpoints.json regionRegex of each
# partition, e.g. ^(us|eu|ap|sa|ca|me|af|il|mx)-\w+-\d+$ for aws, ^eusc-(de)-\w+-\d+$ for aws-eusc, the
# AWS European Sovereign Cloud, whose eusc-de-east-1 is a real Region; a four-letter prefix and a number
# past 9 are allowed). Whether the Region exists is the zone list's to say.
REGION = re.compile(r"[a-z]{2,4}(?:-[a-z]+)+-\d{1,2}")
# Region prefix -> partition, longest first; any other Region is in `aws`.
PARTITIONS = (
    ("us-isob-", "aws-iso-b"),
    ("us-isof-", "aws-iso-f"),
    ("eu-isoe-", "aws-iso-e"),
    ("us-iso-", "aws-iso"),
    ("us-gov-", "aws-us-gov"),
    ("cn-", "aws-cn"),
)


def check_region(region: str) -> tuple[str, str] | None:
    """What is wrong with `region` as an AWS Region, as (problem, fix), or None: the one rule for the config's
    `region` and every command's Region option."""
    if not REGION.fullmatch(region):  # not match(): `$` lets "us-east-2\n" through
        return "not an AWS Region name", 'write a Region such as "us-east-2"'
    if region not in known_zones():
        return (
            "not a Region AWS has (sonic_deploy/config/aws_zones.json lists them)",
            f"use one of {', '.join(sorted(known_zones()))}; if AWS has opened it since, run `{REFRESH_COMMAND}`",
        )
    return None


def partition(region: str) -> str:
    return next((name for prefix, name in PARTITIONS if region.startswith(prefix)), "aws")
