"""Dollars per route, on a made-up price table with round numbers, worked out by hand in each test."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from sonic_deploy.planner.capacity import StreamsPerInstance, Workload
from sonic_deploy.planner.costs import Overheads, ecs_rows, eks_row, nlcus, sagemaker_row
from sonic_deploy.planner.price_table import PriceLookup, PriceRow, PriceTable, RegionPrices
from sonic_deploy.routes.eks.config import EksClusterConfig

DAYS = 730 / 24  # days in AWS's 730-hour month


def price(usd: float, unverified: bool = False) -> PriceRow:
    return PriceRow(usd=usd, unit="test", taken_on=date(2026, 11, 1), source="test", unverified=unverified)


def lookup(**region: dict[str, PriceRow]) -> PriceLookup:
    marketplace = {"sonic-3": {"ml.g6e.xlarge": price(0.50)}}
    table = PriceTable(regions={"us-east-2": RegionPrices.model_validate(region)}, marketplace=marketplace)
    return PriceLookup(table, Path("prices.toml"), "us-east-2")


NETWORK = {
    "nat_gateway_hour": price(0.05),
    "nat_gateway_gb": price(0.05),
    "nlb_hour": price(0.02),
    "nlcu_hour": price(0.01),
}
CLOUDWATCH = {"custom_metric_month": price(0.30), "alarm_month": price(0.10), "logs_ingest_gb": price(0.50)}


def test_sagemaker_worked_example() -> None:
    # 8 instances at peak, 3 off-peak (see test_plan_capacity): 3,710.83 instance-hours a month.
    # Instance 2.00 + software fee 0.50 = 2.50 an instance-hour.
    used: list[PriceRow] = []
    row = sagemaker_row(
        Workload(),
        "ml.g6e.xlarge",
        StreamsPerInstance(8, "test"),
        lookup(sagemaker_hosting={"ml.g6e.xlarge": price(2.00)}),
        "sonic-3",
        used,
    )
    hours = 122 * DAYS
    assert row.pricing == "on-demand + fee"
    assert (row.peak_instances, row.offpeak_instances) == (8, 3)
    assert row.usd_per_hour_at_peak == pytest.approx(8 * 2.50)  # 20.00
    assert row.usd_per_month == pytest.approx(hours * 2.50)  # 9,277.08
    assert row.monthly_breakdown == pytest.approx({"instances": hours * 2.00, "software fee": hours * 0.50})
    # 985,500 minutes of speech a month: 9,277.08 / 985.5 = 9.41 per 1,000 minutes.
    assert row.usd_per_1000_speech_minutes == pytest.approx(hours * 2.50 / 985.5)
    assert row.missing_prices == []
    assert len(used) == 2


def test_sagemaker_without_a_software_fee_says_so() -> None:
    table = PriceTable(
        regions={"us-east-2": RegionPrices(sagemaker_hosting={"ml.g6e.xlarge": price(2.00, unverified=True)})}
    )
    row = sagemaker_row(
        Workload(),
        "ml.g6e.xlarge",
        StreamsPerInstance(8, "test"),
        PriceLookup(table, Path("p"), "us-east-2"),
        "sonic-3",
        [],
    )
    assert row.pricing == "on-demand, no fee"
    assert row.usd_per_hour_at_peak == pytest.approx(16.0)
    assert row.missing_prices == ['marketplace."sonic-3".ml.g6e.xlarge (software fee)']
    assert row.unverified


def test_nlb_capacity_units_follow_the_audio_bytes() -> None:
    # 40 streams x 88,200 B/s (44.1 kHz 16-bit mono) x 3,600 s = 12.70 GB an hour -> 12.70 NLCU;
    # new flows (6.67/s / 800) and active flows (100 / 100,000) are far smaller.
    assert nlcus(Workload(), 100, Overheads()) == pytest.approx(40 * 88_200 * 3600 / 1e9)
    # 8 kHz mu-law telephony audio (8,000 B/s): 40 x 8,000 x 3,600 = 1.152 GB -> 1.152 NLCU.
    assert nlcus(Workload(), 100, Overheads(audio_bytes_per_second=8000)) == pytest.approx(1.152)


def test_ecs_on_demand_worked_example() -> None:
    rows = ecs_rows(
        Workload(),
        "g6e.xlarge",
        StreamsPerInstance(8, "test"),
        lookup(ec2_on_demand={"g6e.xlarge": price(1.00)}, network=NETWORK, cloudwatch=CLOUDWATCH),
        Overheads(),
        [],
    )
    on_demand = rows[0]
    hours = 122 * DAYS  # 3,710.83 instance-hours
    average_instances = hours / 730  # 5.083
    peak_nlcu, offpeak_nlcu = 12.7008, 3.1752  # 40 and 10 streams of 88,200 B/s
    nat = 1 * 0.05 * 730 + 100 * 0.05  # 36.50 + 5.00 = 41.50
    nlb = 0.02 * 730 + DAYS * (peak_nlcu * 10 + offpeak_nlcu * 14) * 0.01  # 14.60 + 52.15 = 66.75
    cloudwatch = 10 * average_instances * 0.30 + 10 * 0.10 + 2 * average_instances * 0.50  # 21.33
    assert on_demand.monthly_breakdown == pytest.approx(
        {"instances": hours * 1.00, "NAT gateway": nat, "NLB": nlb, "CloudWatch": cloudwatch}
    )
    assert on_demand.usd_per_month == pytest.approx(hours + nat + nlb + cloudwatch)  # 3,840.42
    # An hour at peak: 8 instances, 1 NAT gateway with a 730th of its monthly data, the NLB and its 12.70
    # NLCU, and CloudWatch for 8 instances' metrics and logs plus the alarms, per hour.
    at_peak = 8 * 1.00 + 0.05 + 100 * 0.05 / 730 + 0.02 + peak_nlcu * 0.01 + (10 * 8 * 0.30 + 1 + 8) / 730
    assert on_demand.usd_per_hour_at_peak == pytest.approx(at_peak)  # 8.25
    assert on_demand.missing_prices == []


def test_ecs_rows_cover_each_way_of_paying_and_report_missing_prices() -> None:
    rows = ecs_rows(
        Workload(),
        "g6.xlarge",
        StreamsPerInstance(4, "test"),
        lookup(
            ec2_on_demand={"g6.xlarge": price(0.80)},
            ec2_savings_plan_1y={"g6.xlarge": price(0.50)},
            network=NETWORK,
            cloudwatch=CLOUDWATCH,
        ),
        Overheads(),
        [],
    )
    assert [row.pricing for row in rows] == ["on-demand", "spot", "savings plan 1y"]
    on_demand, spot, plan = rows
    assert (on_demand.peak_instances, on_demand.offpeak_instances) == (14, 5)
    # Same overheads, instance-hours priced 0.30 lower: the difference is exactly hours x 0.30.
    hours = (14 * 10 + 5 * 14) * DAYS
    assert on_demand.usd_per_month is not None and plan.usd_per_month is not None
    assert on_demand.usd_per_month - plan.usd_per_month == pytest.approx(hours * 0.30)
    assert spot.usd_per_month is None and spot.usd_per_hour_at_peak is None
    assert spot.missing_prices == ["ec2_spot.g6.xlarge"]


def test_missing_network_prices_count_as_zero_but_are_reported() -> None:
    rows = ecs_rows(
        Workload(),
        "g6e.xlarge",
        StreamsPerInstance(8, "test"),
        lookup(ec2_on_demand={"g6e.xlarge": price(1.00)}),
        Overheads(),
        [],
    )
    assert rows[0].usd_per_month == pytest.approx(122 * DAYS)
    assert "network.nat_gateway_hour" in rows[0].missing_prices
    assert "cloudwatch.alarm_month" in rows[0].missing_prices


EKS_PRICES = {
    "ec2_on_demand": {"g6e.xlarge": price(1.00), "m7i.xlarge": price(0.20)},
    "eks": {"cluster_hour": price(0.10)},
    "network": NETWORK,
    "cloudwatch": CLOUDWATCH,
}


def test_eks_worked_example_is_the_ecs_row_with_a_control_plane_and_system_nodes() -> None:
    prices = lookup(**EKS_PRICES)
    streams = StreamsPerInstance(8, "test")
    (ecs_on_demand, *_) = ecs_rows(Workload(), "g6e.xlarge", streams, prices, Overheads(), [])
    used: list[PriceRow] = []
    row = eks_row(Workload(), "g6e.xlarge", streams, prices, Overheads(), EksClusterConfig(), used)
    # One GPU worker per Karpenter node, as one worker task per ECS instance: 8 at peak, 3 off-peak (N+1).
    assert (row.route, row.pricing) == ("eks", "on-demand")
    assert (row.peak_instances, row.offpeak_instances) == (ecs_on_demand.peak_instances, 3) == (8, 3)
    control_plane = 0.10 * 730  # 73.00, standard support
    system_nodes = 2 * 0.20 * 730  # 292.00: the model's default 2 x m7i.xlarge
    assert row.monthly_breakdown == pytest.approx(
        {
            **ecs_on_demand.monthly_breakdown,  # instances, NAT gateway, NLB, CloudWatch: ECS's, shared
            "EKS control plane (standard support)": control_plane,
            "system nodes (2 x m7i.xlarge)": system_nodes,
        }
    )
    assert ecs_on_demand.usd_per_month is not None and ecs_on_demand.usd_per_hour_at_peak is not None
    assert row.usd_per_month == pytest.approx(ecs_on_demand.usd_per_month + control_plane + system_nodes)
    assert row.usd_per_hour_at_peak == pytest.approx(ecs_on_demand.usd_per_hour_at_peak + 0.10 + 2 * 0.20)
    assert row.missing_prices == []
    assert len(used) == 10  # GPU, control plane, system node, 4 network, 3 CloudWatch


def test_an_existing_cluster_s_control_plane_is_not_charged_but_the_stacks_system_nodes_are() -> None:
    cluster = EksClusterConfig(existing="shared", system_nodes=3)
    row = eks_row(
        Workload(),
        "g6e.xlarge",
        StreamsPerInstance(8, "test"),
        lookup(**EKS_PRICES),
        Overheads(),
        cluster,
        [],
    )
    assert row.monthly_breakdown["EKS control plane (existing cluster shared: not charged here)"] == 0.0
    assert row.monthly_breakdown["system nodes (3 x m7i.xlarge)"] == pytest.approx(3 * 0.20 * 730)
    assert not [label for label in row.monthly_breakdown if "standard support" in label]
    assert row.usd_per_month == pytest.approx(sum(row.monthly_breakdown.values()))
    # The control plane's price is not read, so not missing where the table lacks it; the nodes' is.
    bare = eks_row(
        Workload(),
        "g6e.xlarge",
        StreamsPerInstance(8, "test"),
        lookup(ec2_on_demand={"g6e.xlarge": price(1.00)}, network=NETWORK, cloudwatch=CLOUDWATCH),
        Overheads(),
        cluster,
        [],
    )
    assert bare.missing_prices == ["ec2_on_demand.m7i.xlarge"]
    assert bare.usd_per_month is None


def test_eks_without_a_control_plane_or_system_node_price_is_not_priced_and_says_so() -> None:
    row = eks_row(
        Workload(),
        "g6e.xlarge",
        StreamsPerInstance(8, "test"),
        lookup(ec2_on_demand={"g6e.xlarge": price(1.00)}, network=NETWORK, cloudwatch=CLOUDWATCH),
        Overheads(),
        EksClusterConfig(system_instance_type="m7i.2xlarge"),
        [],
    )
    assert (row.usd_per_month, row.usd_per_hour_at_peak, row.monthly_breakdown) == (None, None, {})
    assert row.missing_prices == ["eks.cluster_hour", "ec2_on_demand.m7i.2xlarge"]
