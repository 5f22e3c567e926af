"""config/prices.toml: every shipped row is sourced and dated; bad rows are named; refreshes keep the file."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import pytest

from sonic_deploy.config import ConfigError
from sonic_deploy.planner.price_refresh import RefreshedPrice
from sonic_deploy.planner.price_table import PriceRow, load_price_table, price_age_days
from sonic_deploy.planner.price_table_writer import update_price_table, write_price_table
from tests.cdk_context import ROOT

CONFIG_DIR = ROOT / "config"


def test_shipped_table_covers_the_readme_comparison_with_dated_sourced_rows() -> None:
    table = load_price_table(CONFIG_DIR)
    ohio = table.regions["us-east-2"]
    assert set(ohio.sagemaker_hosting) >= {"ml.g6e.xlarge"}
    assert set(ohio.ec2_on_demand) >= {"g6e.xlarge", "g6.xlarge", "m7i.xlarge"}  # and EKS's system nodes
    assert set(ohio.eks) == {"cluster_hour"}
    assert set(ohio.ec2_spot) >= {"g6e.xlarge", "g6.xlarge"}
    assert set(ohio.ec2_savings_plan_1y) >= {"g6e.xlarge", "g6.xlarge"}
    rows = [
        *ohio.sagemaker_hosting.values(),
        *ohio.ec2_on_demand.values(),
        *ohio.ec2_spot.values(),
        *ohio.ec2_savings_plan_1y.values(),
        *ohio.network.values(),
        *ohio.cloudwatch.values(),
        *ohio.eks.values(),
    ]
    for row in rows:
        assert row.source.strip() and row.taken_on <= date(2026, 12, 5)  # the newest row's day
        # Nothing in the shipped table was read from AWS itself: each row must say so.
        assert row.unverified, row
    # A savings plan is cheaper than on-demand, Spot cheaper still: a typo in a row would break this.
    for instance_type in ("g6e.xlarge", "g6.xlarge"):
        on_demand = ohio.ec2_on_demand[instance_type].usd
        assert ohio.ec2_spot[instance_type].usd < ohio.ec2_savings_plan_1y[instance_type].usd < on_demand


def test_bad_row_names_the_field(tmp_path: Path) -> None:
    (tmp_path / "prices.toml").write_text(
        '[regions."us-east-2".ec2_on_demand."g6.xlarge"]\nusd = -1\nunit = "h"\ntaken_on = 2026-01-01\nsource = "x"\n'
    )
    with pytest.raises(ConfigError) as caught:
        load_price_table(tmp_path)
    assert str(caught.value).startswith(
        f'{tmp_path}/prices.toml: regions."us-east-2".ec2_on_demand."g6.xlarge".usd = -1: '
        "Input should be greater than or equal to 0. Fix: each row needs usd"
    )


def test_missing_table_and_unknown_kind(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"prices\.toml: .*file not found"):
        load_price_table(tmp_path)
    (tmp_path / "prices.toml").write_text('[regions."us-east-2".ec2_reserved."g6.xlarge"]\nusd = 1\n')
    with pytest.raises(
        ConfigError, match=r'regions\."us-east-2"\.ec2_reserved = .*Extra inputs are not permitted'
    ):
        load_price_table(tmp_path)


def test_age_is_the_oldest_row_used() -> None:
    rows = [
        PriceRow(usd=1, unit="h", taken_on=day, source="s") for day in (date(2026, 11, 1), date(2026, 8, 26))
    ]
    assert price_age_days(rows, date(2026, 11, 30)) == 96
    assert price_age_days([], date(2026, 11, 30)) is None


def refreshed(kind: str, instance_type: str, usd: float) -> RefreshedPrice:
    row = PriceRow(usd=usd, unit="instance-hour", taken_on=date(2026, 11, 30), source="AWS Price List API")
    return RefreshedPrice("us-east-2", kind, instance_type, row)  # type: ignore[arg-type]


def test_refresh_rewrites_one_row_and_keeps_comments_and_the_rest() -> None:
    text = (CONFIG_DIR / "prices.toml").read_text()
    updated = update_price_table(text, [refreshed("ec2_on_demand", "g6e.xlarge", 1.9)])
    section = updated.split('[regions."us-east-2".ec2_on_demand."g6e.xlarge"]\n')[1].split("\n\n")[0]
    assert section == (
        'usd = 1.9\nunit = "instance-hour"\ntaken_on = 2026-11-30\nsource = "AWS Price List API"'
    )  # and no `unverified = true` any more
    assert [line for line in text.splitlines() if line.startswith("#")] == [
        line for line in updated.splitlines() if line.startswith("#")
    ]
    assert len(updated.splitlines()) == len(text.splitlines()) - 1  # only the unverified line went


def test_refresh_appends_a_row_the_table_lacked(tmp_path: Path) -> None:
    shutil.copy(CONFIG_DIR / "prices.toml", tmp_path / "prices.toml")
    write_price_table(tmp_path / "prices.toml", [refreshed("ec2_spot", "g6e.2xlarge", 0.9)])
    table = load_price_table(tmp_path)
    assert table.regions["us-east-2"].ec2_spot["g6e.2xlarge"].usd == 0.9
    assert table.regions["us-east-2"].ec2_spot["g6e.xlarge"].usd == 0.63  # untouched
    assert not list(tmp_path.glob(".prices-*"))  # no temporary file left behind
