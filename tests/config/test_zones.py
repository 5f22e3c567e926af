"""The Region and AZ list config is checked against, and its refresh from EC2 (botocore's Stubber, with the
real response shapes: a stubbed reply that does not fit EC2's model fails the test)."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from sonic_deploy.config.zones import ZONES_FILE, known_zones, main, refresh


def test_refresh_adds_a_name_the_list_lacks(tmp_path: Path) -> None:
    session = _Session()
    session.stub("us-east-1").add_response(
        "describe_regions",
        {"Regions": [{"RegionName": "us-east-2", "Endpoint": "x", "OptInStatus": "opt-in-not-required"}]},
        {"AllRegions": True},
    )
    session.stub("us-east-2").add_response(
        "describe_availability_zones",
        {"AvailabilityZones": [_zone("us-east-2d", "us-east-2")]},
        {"AllAvailabilityZones": True, "Filters": [{"Name": "zone-type", "Values": ["availability-zone"]}]},
    )
    target = tmp_path / "aws_zones.json"
    target.write_text(json.dumps({"_source": "x", "regions": {"us-east-2": ["us-east-2a"]}}))
    for stubber in session.stubbers:
        stubber.activate()
    try:
        zones = refresh(session, target, today=date(2026, 12, 1))
    finally:
        known_zones.cache_clear()
    assert zones == {"us-east-2": ["us-east-2a", "us-east-2d"]}


# Names an account may see (AWS, "AZ IDs": older accounts in independently mapped Regions see letters that
# newer ones do not), and the Regions of each partition (botocore's endpoints.json).
@pytest.mark.parametrize(
    "zone",
    ["ap-northeast-1b", "ap-northeast-1d", "us-east-1f", "us-west-1b", "us-west-2d", "ca-central-1d"],
)
def test_a_zone_some_accounts_see_is_listed(zone: str) -> None:
    assert zone in known_zones()[zone[:-1]]


@pytest.mark.parametrize("region", ["eusc-de-east-1", "cn-north-1", "us-gov-west-1", "mx-central-1"])
def test_every_partitions_regions_are_listed(region: str) -> None:
    assert len(known_zones()[region]) >= 3


def test_the_shipped_list_covers_the_shipped_environments() -> None:
    zones = known_zones()
    assert zones["us-east-2"] == ("us-east-2a", "us-east-2b", "us-east-2c")
    assert all(zone.startswith(region) for region, names in zones.items() for zone in names)
    assert json.loads(ZONES_FILE.read_text())["_source"]


class _Session:
    """What refresh() asks of a boto3 Session: a client per Region, each stubbed."""

    def __init__(self) -> None:
        self.clients: dict[str, Any] = {}
        self.stubbers: list[Stubber] = []

    def client(self, service: str, region_name: str) -> Any:
        assert service == "ec2"
        return self.clients[region_name]

    def stub(self, region: str) -> Stubber:
        client = boto3.client("ec2", region_name=region, aws_access_key_id="x", aws_secret_access_key="x")
        self.clients[region] = client
        stubber = Stubber(client)
        self.stubbers.append(stubber)
        return stubber


def _zone(name: str, region: str) -> dict[str, object]:
    return {
        "ZoneName": name,
        "ZoneId": f"use2-az{name[-1]}",
        "RegionName": region,
        "State": "available",
        "OptInStatus": "opt-in-not-required",
        "ZoneType": "availability-zone",
        "GroupName": region,
        "NetworkBorderGroup": region,
        "Messages": [],
    }


def test_refresh_asks_ec2_and_keeps_regions_not_opted_into(tmp_path: Path) -> None:
    session = _Session()
    global_ec2 = session.stub("us-east-1")
    global_ec2.add_response(
        "describe_regions",
        {
            "Regions": [
                {
                    "RegionName": "us-east-2",
                    "Endpoint": "ec2.us-east-2.amazonaws.com",
                    "OptInStatus": "opt-in-not-required",
                },
                {
                    "RegionName": "af-south-1",
                    "Endpoint": "ec2.af-south-1.amazonaws.com",
                    "OptInStatus": "not-opted-in",
                },
            ]
        },
        {"AllRegions": True},
    )
    ohio = session.stub("us-east-2")
    ohio.add_response(
        "describe_availability_zones",
        {"AvailabilityZones": [_zone("us-east-2b", "us-east-2"), _zone("us-east-2a", "us-east-2")]},
        {"AllAvailabilityZones": True, "Filters": [{"Name": "zone-type", "Values": ["availability-zone"]}]},
    )
    target = tmp_path / "aws_zones.json"
    for stubber in session.stubbers:
        stubber.activate()
    try:
        zones = refresh(session, target, today=date(2026, 12, 1))
    finally:
        known_zones.cache_clear()
    for stubber in session.stubbers:
        stubber.assert_no_pending_responses()
    # One account's view is added to the list, never cut from it: us-east-2c (another account's), the
    # Region not opted into and the other partitions' Regions (DescribeRegions lists one) all stay.
    assert zones["af-south-1"] == ["af-south-1a", "af-south-1b", "af-south-1c"]
    assert zones["us-east-2"] == ["us-east-2a", "us-east-2b", "us-east-2c"]
    assert set(zones) == set(known_zones())
    written = json.loads(target.read_text())
    assert written["regions"] == zones
    assert "EC2 DescribeRegions and DescribeAvailabilityZones added, 2026-12-01" in written["_source"]
    assert known_zones()["us-east-2"] == (
        "us-east-2a",
        "us-east-2b",
        "us-east-2c",
    )  # the shipped file untouched


def test_listing_needs_no_aws(capsys: Any) -> None:
    assert main([]) == 0
    assert "us-east-2: us-east-2a us-east-2b us-east-2c" in capsys.readouterr().out
