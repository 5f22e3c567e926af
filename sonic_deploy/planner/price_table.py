"""config/prices.toml: dated list prices with their sources, read into typed rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError

from sonic_deploy.config import ConfigError
from sonic_deploy.config.base import Strict
from sonic_deploy.config.explain import toml_path
from sonic_deploy.config.loader import read_toml

PRICES_FILE = "prices.toml"

InstanceKind = Literal["sagemaker_hosting", "ec2_on_demand", "ec2_spot", "ec2_savings_plan_1y"]
NetworkItem = Literal["nat_gateway_hour", "nat_gateway_gb", "nlb_hour", "nlcu_hour", "cross_az_gb"]
CloudWatchItem = Literal["custom_metric_month", "alarm_month", "logs_ingest_gb"]
EksItem = Literal["cluster_hour"]  # the control plane at the standard-support rate


class PriceRow(Strict):
    """One price, with where it came from and when it was valid. Strict: finite, not a boolean, no control
    character or CloudFormation syntax in the text."""

    # The dearest GPU instance-hour AWS lists is a few hundred dollars: a price past this is a typo.
    usd: Annotated[float, Field(ge=0, le=100_000)]
    unit: str
    taken_on: date
    source: str = Field(min_length=1)
    unverified: bool = False


class RegionPrices(Strict):
    sagemaker_hosting: dict[str, PriceRow] = Field(default_factory=dict)
    ec2_on_demand: dict[str, PriceRow] = Field(default_factory=dict)
    ec2_spot: dict[str, PriceRow] = Field(default_factory=dict)
    ec2_savings_plan_1y: dict[str, PriceRow] = Field(default_factory=dict)
    network: dict[NetworkItem, PriceRow] = Field(default_factory=dict)
    cloudwatch: dict[CloudWatchItem, PriceRow] = Field(default_factory=dict)
    eks: dict[EksItem, PriceRow] = Field(default_factory=dict)


class PriceTable(Strict):
    regions: dict[str, RegionPrices] = Field(default_factory=dict)
    marketplace: dict[str, dict[str, PriceRow]] = Field(default_factory=dict)


@dataclass(frozen=True)
class PriceLookup:
    """The prices one plan uses, remembering which rows it read so that it can report their age."""

    table: PriceTable
    path: Path
    region: str

    def _region(self) -> RegionPrices:
        return self.table.regions.get(self.region, RegionPrices())

    def instance(self, kind: InstanceKind, instance_type: str) -> PriceRow | None:
        rows: dict[str, PriceRow] = getattr(self._region(), kind)
        return rows.get(instance_type)

    def network(self, item: NetworkItem) -> PriceRow | None:
        return self._region().network.get(item)

    def cloudwatch(self, item: CloudWatchItem) -> PriceRow | None:
        return self._region().cloudwatch.get(item)

    def eks(self, item: EksItem) -> PriceRow | None:
        return self._region().eks.get(item)

    def software_fee(self, sonic_version: str, instance_type: str) -> PriceRow | None:
        return self.table.marketplace.get(sonic_version, {}).get(instance_type)


def load_price_table(config_dir: Path) -> PriceTable:
    path = config_dir / PRICES_FILE
    # config's own reader: the same errors for a folder, bytes that are not UTF-8, nesting too deep to read
    # and a syntax error (with its line) as every other file in config/.
    data = read_toml(path, missing_fix=f"restore {PRICES_FILE} from the repository, or pass --config-dir")
    try:
        return PriceTable.model_validate(data)
    except RecursionError:
        raise ConfigError(
            file=path,
            field="(nesting)",
            value="(unreadable)",
            problem="tables nested too deeply to check",
            fix='keep the layout [regions."<region>".<kind>."<item>"]',
        ) from None
    except ValidationError as error:
        first = error.errors()[0]
        field = toml_path(first["loc"])  # spelt as the config loader's errors spell a key
        raise ConfigError(
            file=path,
            field=field,
            value=first.get("input"),
            problem=first["msg"].rstrip("."),
            fix="each row needs usd (a number >= 0), unit, taken_on (a date such as 2026-11-30) and source; "
            "kinds are sagemaker_hosting, ec2_on_demand, ec2_spot, ec2_savings_plan_1y, network, cloudwatch, eks",
        ) from None


def price_age_days(rows: list[PriceRow], today: date) -> int | None:
    """Age in days of the oldest row used, or None when no row was used."""
    if not rows:
        return None
    return max((today - row.taken_on).days for row in rows)
