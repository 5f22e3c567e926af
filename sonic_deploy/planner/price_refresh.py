"""`plan --refresh-prices`: current list prices from AWS, written into config/prices.toml with today's date.

On-demand EC2 and SageMaker hosting prices come from the AWS Price List API (`pricing:GetProducts`, served from
us-east-1 for every Region); Spot prices from EC2's Spot price history in the Region itself (the highest
current price across its Availability Zones, so that the plan errs on the dear side). The EKS rows' own prices,
the control plane's cluster-hour (standard support) and the system nodes' On-Demand type, come from the Price
List API too. Savings-plan, network, CloudWatch and Marketplace rows are left as they are.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, Literal

from sonic_deploy.planner.price_table import EksItem, InstanceKind, PriceRow

if TYPE_CHECKING:
    from mypy_boto3_ec2 import EC2Client
    from mypy_boto3_pricing import PricingClient
    from mypy_boto3_pricing.type_defs import FilterTypeDef

PRICING_API_REGION = "us-east-1"
PRICE_LIST_SOURCE = "AWS Price List API (pricing:GetProducts)"
SPOT_SOURCE = "EC2 DescribeSpotPriceHistory, Linux/UNIX, highest current price across the Region's AZs"


# The control plane in standard support: `<Region prefix>-AmazonEKS-Hours:perCluster`. Extended support is
# billed under its own usage type, which this leaves out (the plan prices standard support only).
EKS_CLUSTER_USAGE = re.compile(r"(^|-)AmazonEKS-Hours:perCluster$")


@dataclass(frozen=True)
class RefreshedPrice:
    region: str
    kind: InstanceKind | Literal["eks"]
    instance_type: str  # the instance type; for kind eks, the item (EksItem)
    row: PriceRow


class PriceNotFoundError(Exception):
    """AWS answered, but not with a price for this instance type and Region."""


def fetch_prices(
    pricing: PricingClient, ec2: EC2Client, region: str, instance_types: list[str], today: date
) -> tuple[list[RefreshedPrice], list[str]]:
    """Prices for each instance type, and a line for each price AWS did not give. `pricing` is a client in
    PRICING_API_REGION, `ec2` one in `region`."""
    found: list[RefreshedPrice] = []
    problems: list[str] = []

    def row(usd: float, source: str) -> PriceRow:
        return PriceRow(usd=usd, unit="instance-hour", taken_on=today, source=source)

    for instance_type in instance_types:
        try:
            if instance_type.startswith("ml."):
                usd = _sagemaker_hosting_price(pricing, region, instance_type)
                found.append(
                    RefreshedPrice(region, "sagemaker_hosting", instance_type, row(usd, PRICE_LIST_SOURCE))
                )
                continue
            usd = _ec2_on_demand_price(pricing, region, instance_type)
            found.append(RefreshedPrice(region, "ec2_on_demand", instance_type, row(usd, PRICE_LIST_SOURCE)))
            history = ec2.describe_spot_price_history(
                InstanceTypes=[instance_type],  # type: ignore[list-item]  # any string AWS knows
                ProductDescriptions=["Linux/UNIX"],
                StartTime=datetime.now(UTC),
            )
            spot = [float(item["SpotPrice"]) for item in history["SpotPriceHistory"] if "SpotPrice" in item]
            if spot:
                found.append(RefreshedPrice(region, "ec2_spot", instance_type, row(max(spot), SPOT_SOURCE)))
            else:
                problems.append(f"{instance_type}: no Spot price in {region} (not offered as Spot there?)")
        except PriceNotFoundError as error:
            problems.append(f"{instance_type}: {error}")
    return found, problems


def fetch_eks_prices(
    pricing: PricingClient, region: str, system_types: list[str], today: date
) -> tuple[list[RefreshedPrice], list[str]]:
    """The EKS rows' own prices: the control plane's cluster-hour at the standard-support rate and each system
    node type On-Demand (no Spot: the system node group is On-Demand), with a line for each AWS did not give."""
    found: list[RefreshedPrice] = []
    problems: list[str] = []
    item: EksItem = "cluster_hour"
    try:
        usd = _eks_cluster_price(pricing, region)
        row = PriceRow(usd=usd, unit="cluster-hour", taken_on=today, source=PRICE_LIST_SOURCE)
        found.append(RefreshedPrice(region, "eks", item, row))
    except PriceNotFoundError as error:
        problems.append(f"eks {item}: {error}")
    for instance_type in system_types:
        try:
            usd = _ec2_on_demand_price(pricing, region, instance_type)
            row = PriceRow(usd=usd, unit="instance-hour", taken_on=today, source=PRICE_LIST_SOURCE)
            found.append(RefreshedPrice(region, "ec2_on_demand", instance_type, row))
        except PriceNotFoundError as error:
            problems.append(f"{instance_type}: {error}")
    return found, problems


def _eks_cluster_price(pricing: PricingClient, region: str) -> float:
    products = [
        p
        for p in _products(pricing, "AmazonEKS", _filters(regionCode=region))
        if EKS_CLUSTER_USAGE.search(p["product"]["attributes"].get("usagetype", ""))
    ]
    return _single_on_demand_price(products, f"the EKS control plane (standard support) in {region}")


def _ec2_on_demand_price(pricing: PricingClient, region: str, instance_type: str) -> float:
    filters = _filters(
        regionCode=region,
        instanceType=instance_type,
        operatingSystem="Linux",
        tenancy="Shared",
        preInstalledSw="NA",
        capacitystatus="Used",
    )
    products = [
        p
        for p in _products(pricing, "AmazonEC2", filters)
        if "BoxUsage:" in p["product"]["attributes"].get("usagetype", "")
    ]
    return _single_on_demand_price(products, f"EC2 {instance_type} in {region}")


def _sagemaker_hosting_price(pricing: PricingClient, region: str, instance_type: str) -> float:
    hosting = re.compile(r"(^|-)Host:" + re.escape(instance_type) + "$")
    filters = _filters(regionCode=region, instanceName=instance_type)
    products = [
        p
        for p in _products(pricing, "AmazonSageMaker", filters)
        if hosting.search(p["product"]["attributes"].get("usagetype", ""))
    ]
    return _single_on_demand_price(products, f"SageMaker hosting {instance_type} in {region}")


def _filters(**terms: str) -> list[FilterTypeDef]:
    return [{"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in terms.items()]


def _products(
    pricing: PricingClient, service_code: str, filters: list[FilterTypeDef]
) -> list[dict[str, Any]]:
    products: list[dict[str, Any]] = []
    for page in pricing.get_paginator("get_products").paginate(ServiceCode=service_code, Filters=filters):
        products.extend(json.loads(item) for item in page["PriceList"])
    return products


def _single_on_demand_price(products: list[dict[str, Any]], what: str) -> float:
    prices = set()
    for product in products:
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            for dimension in term.get("priceDimensions", {}).values():
                usd = float(dimension.get("pricePerUnit", {}).get("USD", "0"))
                if usd > 0:
                    prices.add(usd)
    if not prices:
        raise PriceNotFoundError(f"the Price List API has no on-demand price for {what}")
    if len(prices) > 1:
        raise PriceNotFoundError(
            f"the Price List API has {len(prices)} different on-demand prices for {what}: "
            f"{sorted(prices)}; set it by hand"
        )
    return prices.pop()
