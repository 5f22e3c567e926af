"""--refresh-prices against botocore Stubbers with the Price List API's and EC2's real response shapes
(moto does not implement the Pricing API, and its Spot history is one fixed placeholder price)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from sonic_deploy.cli import main
from sonic_deploy.planner.price_refresh import PRICE_LIST_SOURCE, SPOT_SOURCE, fetch_eks_prices, fetch_prices
from sonic_deploy.planner.price_table import load_price_table
from tests.cdk_context import ROOT

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_pricing import PricingClient

TODAY = date(2026, 11, 30)


def price_list_item(service: str, usagetype: str, usd: str, **attributes: str) -> str:
    """One PriceList entry as GetProducts returns it: a JSON document in a string."""
    return json.dumps(
        {
            "product": {
                "productFamily": "Compute Instance",
                "attributes": {"usagetype": usagetype, "regionCode": "us-east-2", **attributes},
                "sku": "ABCDEFGHIJKLMNOP",
            },
            "serviceCode": service,
            "terms": {
                "OnDemand": {
                    "ABCDEFGHIJKLMNOP.JRTCKXETXF": {
                        "priceDimensions": {
                            "ABCDEFGHIJKLMNOP.JRTCKXETXF.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "endRange": "Inf",
                                "description": f"${usd} per On Demand hour",
                                "appliesTo": [],
                                "rateCode": "ABCDEFGHIJKLMNOP.JRTCKXETXF.6YS6EN2CT7",
                                "beginRange": "0",
                                "pricePerUnit": {"USD": usd},
                            }
                        },
                        "sku": "ABCDEFGHIJKLMNOP",
                        "effectiveDate": "2026-11-01T00:00:00Z",
                        "offerTermCode": "JRTCKXETXF",
                        "termAttributes": {},
                    }
                }
            },
            "version": "20261101000000",
            "publicationDate": "2026-11-01T00:00:00Z",
        }
    )


def term(field: str, value: str) -> dict[str, str]:
    return {"Type": "TERM_MATCH", "Field": field, "Value": value}


@pytest.fixture
def clients() -> Iterator[tuple[PricingClient, Stubber, EC2Client, Stubber]]:
    pricing = boto3.client(
        "pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    ec2 = boto3.client("ec2", region_name="us-east-2", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(pricing) as pricing_stub, Stubber(ec2) as ec2_stub:
        yield pricing, pricing_stub, ec2, ec2_stub
        pricing_stub.assert_no_pending_responses()
        ec2_stub.assert_no_pending_responses()


def spot(zone: str, usd: str) -> dict[str, Any]:
    return {
        "AvailabilityZone": zone,
        "InstanceType": "g6e.xlarge",
        "ProductDescription": "Linux/UNIX",
        "SpotPrice": usd,
        "Timestamp": datetime(2026, 11, 30, tzinfo=UTC),
    }


def test_ec2_on_demand_and_spot(clients: tuple[PricingClient, Stubber, EC2Client, Stubber]) -> None:
    pricing, pricing_stub, ec2, ec2_stub = clients
    filters = [
        term("regionCode", "us-east-2"),
        term("instanceType", "g6e.xlarge"),
        term("operatingSystem", "Linux"),
        term("tenancy", "Shared"),
        term("preInstalledSw", "NA"),
        term("capacitystatus", "Used"),
    ]
    pricing_stub.add_response(
        "get_products",
        {
            "FormatVersion": "aws_v1",
            # Dedicated-host and reservation lines share these filters; only BoxUsage is the instance price.
            "PriceList": [
                price_list_item("AmazonEC2", "USE2-BoxUsage:g6e.xlarge", "1.8610000000"),
                price_list_item("AmazonEC2", "USE2-Reservation:g6e.xlarge", "0.0000000000"),
            ],
        },
        {"ServiceCode": "AmazonEC2", "Filters": filters},
    )
    ec2_stub.add_response(
        "describe_spot_price_history",
        {"SpotPriceHistory": [spot("us-east-2a", "0.612300"), spot("us-east-2b", "0.701000")]},
        {"InstanceTypes": ["g6e.xlarge"], "ProductDescriptions": ["Linux/UNIX"], "StartTime": ANY},
    )
    found, problems = fetch_prices(pricing, ec2, "us-east-2", ["g6e.xlarge"], TODAY)
    assert problems == []
    assert [(p.kind, p.instance_type, p.row.usd, p.row.source, p.row.taken_on) for p in found] == [
        ("ec2_on_demand", "g6e.xlarge", 1.861, PRICE_LIST_SOURCE, TODAY),
        ("ec2_spot", "g6e.xlarge", 0.701, SPOT_SOURCE, TODAY),  # the dearest AZ
    ]
    assert not any(p.row.unverified for p in found)


def test_sagemaker_hosting_ignores_training_and_notebook_prices(
    clients: tuple[PricingClient, Stubber, EC2Client, Stubber],
) -> None:
    pricing, pricing_stub, ec2, _ = clients
    pricing_stub.add_response(
        "get_products",
        {
            "FormatVersion": "aws_v1",
            "PriceList": [
                price_list_item("AmazonSageMaker", "USE2-Train:ml.g6e.xlarge", "2.3400000000"),
                price_list_item("AmazonSageMaker", "USE2-Host:ml.g6e.xlarge", "2.6110000000"),
                price_list_item("AmazonSageMaker", "USE2-Notebk:ml.g6e.xlarge", "2.0000000000"),
            ],
            "NextToken": "page-2",
        },
        {
            "ServiceCode": "AmazonSageMaker",
            "Filters": [term("regionCode", "us-east-2"), term("instanceName", "ml.g6e.xlarge")],
        },
    )
    pricing_stub.add_response(
        "get_products",
        {
            "FormatVersion": "aws_v1",
            "PriceList": [price_list_item("AmazonSageMaker", "USE2-AsyncInf:ml.g6e.xlarge", "2.6")],
        },
        {
            "ServiceCode": "AmazonSageMaker",
            "Filters": [term("regionCode", "us-east-2"), term("instanceName", "ml.g6e.xlarge")],
            "NextToken": "page-2",
        },
    )
    found, problems = fetch_prices(pricing, ec2, "us-east-2", ["ml.g6e.xlarge"], TODAY)
    assert problems == []
    assert [(p.kind, p.row.usd) for p in found] == [("sagemaker_hosting", 2.611)]


def test_no_price_is_a_problem_line_not_a_crash(
    clients: tuple[PricingClient, Stubber, EC2Client, Stubber],
) -> None:
    pricing, pricing_stub, ec2, _ = clients
    pricing_stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": []}, None)
    found, problems = fetch_prices(pricing, ec2, "us-east-2", ["g6.4xlarge"], TODAY)
    assert found == []
    assert problems == [
        "g6.4xlarge: the Price List API has no on-demand price for EC2 g6.4xlarge in us-east-2"
    ]


def test_plan_refresh_prices_writes_the_table_then_plans_with_it(
    clients: tuple[PricingClient, Stubber, EC2Client, Stubber],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pricing, pricing_stub, ec2, ec2_stub = clients
    pricing_stub.add_response(
        "get_products",
        {
            "FormatVersion": "aws_v1",
            "PriceList": [price_list_item("AmazonEC2", "USE2-BoxUsage:g6.xlarge", "0.9")],
        },
        None,
    )
    ec2_stub.add_response("describe_spot_price_history", {"SpotPriceHistory": []}, None)
    # Then the EKS rows' own: the control plane, and the system nodes' type (dev's: the default m7i.xlarge).
    eks = price_list_item("AmazonEKS", "USE2-AmazonEKS-Hours:perCluster", "0.1000000000")
    pricing_stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": [eks]}, None)
    m7i = price_list_item("AmazonEC2", "USE2-BoxUsage:m7i.xlarge", "0.2016000000")
    pricing_stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": [m7i]}, None)

    class FakeSession:
        def __init__(self, profile_name: str | None = None) -> None:
            assert profile_name == "billing"

        def client(self, service: str, region_name: str) -> object:
            return {("pricing", "us-east-1"): pricing, ("ec2", "us-east-2"): ec2}[(service, region_name)]

    monkeypatch.setattr(boto3, "Session", FakeSession)
    config = tmp_path / "config"
    shutil.copytree(ROOT / "config", config)
    args = ["--instance-types", "g6.xlarge", "--profile", "billing", "--json"]
    assert main(["plan", "--config-dir", str(config), "--refresh-prices", *args]) == 0
    captured = capsys.readouterr()
    assert "refreshed ec2_on_demand g6.xlarge in us-east-2: $0.9/hour" in captured.err
    assert "not refreshed: g6.xlarge: no Spot price in us-east-2" in captured.err
    assert "refreshed eks cluster_hour in us-east-2: $0.1/hour" in captured.err
    table = load_price_table(config).regions["us-east-2"]
    row = table.ec2_on_demand["g6.xlarge"]
    assert (row.usd, row.source, row.unverified) == (0.9, PRICE_LIST_SOURCE, False)
    assert row.taken_on == datetime.now(UTC).date()
    # The hand-written EKS rows are rewritten in place (one section each), no longer unverified.
    for refreshed in (table.eks["cluster_hour"], table.ec2_on_demand["m7i.xlarge"]):
        assert (refreshed.source, refreshed.unverified) == (PRICE_LIST_SOURCE, False)
    text = (config / "prices.toml").read_text()
    assert text.count('[regions."us-east-2".eks."cluster_hour"]') == 1
    assert text.count('[regions."us-east-2".ec2_on_demand."m7i.xlarge"]') == 1
    plan = json.loads(captured.out)
    assert plan["rows"][0]["monthly_breakdown"]["instances"] == pytest.approx(
        (14 * 10 + 5 * 14) * 730 / 24 * 0.9
    )


def test_eks_control_plane_is_the_standard_support_rate_and_system_nodes_on_demand_only(
    clients: tuple[PricingClient, Stubber, EC2Client, Stubber],
) -> None:
    pricing, pricing_stub, _, _ = clients  # no Spot history asked for the system nodes
    pricing_stub.add_response(
        "get_products",
        {
            "FormatVersion": "aws_v1",
            # Extended support, Fargate and Auto Mode are billed under their own usage types.
            "PriceList": [
                price_list_item("AmazonEKS", "USE2-AmazonEKS-Hours:perCluster", "0.1000000000"),
                price_list_item("AmazonEKS", "USE2-AmazonEKS-Hours:extendedSupport", "0.5000000000"),
                price_list_item("AmazonEKS", "USE2-Fargate-vCPU-Hours:perCPU", "0.0404800000"),
            ],
        },
        {"ServiceCode": "AmazonEKS", "Filters": [term("regionCode", "us-east-2")]},
    )
    pricing_stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": []}, None)
    found, problems = fetch_eks_prices(pricing, "us-east-2", ["m7i.xlarge"], TODAY)
    assert [(p.kind, p.instance_type, p.row.usd, p.row.unit, p.row.source) for p in found] == [
        ("eks", "cluster_hour", 0.1, "cluster-hour", PRICE_LIST_SOURCE)
    ]
    assert problems == [
        "m7i.xlarge: the Price List API has no on-demand price for EC2 m7i.xlarge in us-east-2"
    ]
