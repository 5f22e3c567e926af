"""The fallback AZ's cost: each overflow instance-hour and the audio it sends across AZs, worked out by hand."""

from __future__ import annotations

import json

import pytest

from sonic_deploy.cli import main
from sonic_deploy.planner.capacity import StreamsPerInstance, Workload
from sonic_deploy.planner.costs import Overheads
from sonic_deploy.planner.fallback import fallback_cost
from sonic_deploy.planner.price_table import PriceRow
from tests.conftest import EditConfig
from tests.planner.test_plan_costs import lookup, price

# 8 streams per instance at 0.8 utilisation: 6.4 open streams x 88,200 B/s x 3,600 s = 2.032128 GB an hour.
GB_PER_HOUR = 6.4 * 88_200 * 3600 / 1e9
FALLBACK = '[ecs.capacity.fallback]\navailability_zone = "us-east-2b"\ninstance_types = ["g6e.xlarge", "g6.4xlarge"]\n'


def test_each_type_costs_its_instance_and_the_audio_it_sends_across() -> None:
    used: list[PriceRow] = []
    cost = fallback_cost(
        Workload(),
        "us-east-2a",
        "us-east-2b",
        {"g6e.xlarge": StreamsPerInstance(8, "test"), "g6.xlarge": StreamsPerInstance(4, "test")},
        "on-demand",
        lookup(ec2_on_demand={"g6e.xlarge": price(2.00)}, network={"cross_az_gb": price(0.01)}),
        Overheads(),
        used,
    )
    g6e, g6 = cost.types
    # Each GB is charged 0.01 out of us-east-2b and 0.01 into us-east-2a: 2.032128 x 0.02 = 0.0406 an hour.
    assert g6e.cross_az_gb_per_hour == pytest.approx(GB_PER_HOUR)
    assert g6e.cross_az_usd_per_hour == pytest.approx(GB_PER_HOUR * 0.02)
    assert g6e.usd_per_hour == pytest.approx(2.00 + GB_PER_HOUR * 0.02)
    assert g6e.streams == pytest.approx(6.4)
    assert g6e.pricing == "on-demand"
    # No price for g6.xlarge: said, not counted as free; its transfer (half the streams) still shown.
    assert (g6.usd_per_instance_hour, g6.usd_per_hour) == (None, None)
    assert g6.cross_az_usd_per_hour == pytest.approx(GB_PER_HOUR / 2 * 0.02)
    assert cost.missing_prices == ["ec2_on_demand.g6.xlarge"]
    assert len(used) == 2


def test_spot_market_prices_spot_and_a_missing_transfer_price_is_reported() -> None:
    cost = fallback_cost(
        Workload(),
        "us-east-2a",
        "us-east-2b",
        {"g6e.xlarge": StreamsPerInstance(8, "test")},
        "spot",
        lookup(ec2_spot={"g6e.xlarge": price(0.70)}, ec2_on_demand={"g6e.xlarge": price(2.00)}),
        Overheads(),
        [],
    )
    (g6e,) = cost.types
    assert g6e.pricing == "spot"
    assert g6e.usd_per_hour == pytest.approx(0.70)
    assert cost.missing_prices == ["network.cross_az_gb"]
    assert not cost.unverified


def test_plan_shows_the_environments_fallback(
    edit_config: EditConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    config = edit_config("environments/dev.toml", "[ecs.api]", f"{FALLBACK}\n[ecs.api]")
    assert main(["plan", "--config-dir", str(config), "--env", "dev"]) == 0
    out = capsys.readouterr().out
    # The shipped prices (unverified rows: marked *) at the environment's market, on-demand.
    assert "Fallback AZ us-east-2b ([ecs.capacity.fallback]): no instance until us-east-2a has no GPU" in out
    lines = [line for line in out.splitlines() if line.startswith("  g6e.xlarge (on-demand): $")]
    assert len(lines) == 1
    assert f"+ $0.041* cross-AZ ({GB_PER_HOUR:.2f} GB/h for 6.4 streams) = $" in lines[0]

    assert main(["plan", "--config-dir", str(config), "--env", "dev", "--json"]) == 0
    fallback = json.loads(capsys.readouterr().out)["fallback"]
    assert fallback["availability_zone"] == "us-east-2b"
    assert [t["instance_type"] for t in fallback["types"]] == ["g6e.xlarge", "g6.4xlarge"]


def test_no_fallback_no_section(capsys: pytest.CaptureFixture[str], edit_config: EditConfig) -> None:
    config = edit_config("environments/dev.toml", "", "")
    assert main(["plan", "--config-dir", str(config), "--env", "dev", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fallback"] is None
    assert main(["plan", "--config-dir", str(config), "--env", "dev"]) == 0
    assert "Fallback AZ" not in capsys.readouterr().out
