"""Put a plan together: streams per instance for each type, then rows of instances and dollars per route."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from pathlib import Path

from sonic_deploy.config import ConfigError, Settings
from sonic_deploy.planner.capacity import StreamsPerInstance, Workload
from sonic_deploy.planner.costs import EcsOverheads, PlanRow, ecs_rows, sagemaker_row
from sonic_deploy.planner.price_table import PriceLookup, PriceRow, PriceTable, price_age_days
from sonic_deploy.planner.probe_summary import MeasuredConcurrency

DEFAULT_INSTANCE_TYPES = ("ml.g6e.xlarge", "g6e.xlarge", "g6.xlarge")


@dataclass(frozen=True)
class Plan:
    workload: Workload
    region: str
    sonic_version: str
    rows: list[PlanRow]
    prices_file: Path
    oldest_price: date | None
    price_age_days: int | None
    unverified_prices: int
    notes: list[str]


def build_plan(
    settings: Settings,
    table: PriceTable,
    prices_file: Path,
    workload: Workload,
    region: str,
    instance_types: list[str],
    overheads: EcsOverheads,
    today: date,
    measured: tuple[str, MeasuredConcurrency] | None = None,
) -> Plan:
    lookup = PriceLookup(table, prices_file, region)
    sonic_version = settings.environment.sonic_version
    used: list[PriceRow] = []
    rows: list[PlanRow] = []
    for instance_type in instance_types:
        streams = streams_per_instance(settings, instance_type, measured)
        if instance_type.startswith("ml."):
            rows.append(sagemaker_row(workload, instance_type, streams, lookup, sonic_version, used))
        else:
            rows.extend(ecs_rows(workload, instance_type, streams, lookup, overheads, used))
    notes = []
    missing = sorted({label for row in rows for label in row.missing_prices})
    fees = [label for label in missing if label.startswith("marketplace.")]
    others = [label for label in missing if label not in fees]
    if others:
        notes.append(
            f"Not in {prices_file} for {region}: {', '.join(others)}. Add the rows or run "
            "`sonic-deploy plan --refresh-prices`; a missing network or CloudWatch price counts as $0."
        )
    if fees:
        notes.append(
            f"No Marketplace software fee in {prices_file} ({', '.join(fees)}): SageMaker rows are instances "
            "only (`on-demand, no fee`). Add the fee from the listing's pricing tab."
        )
    unverified = {row for row in used if row.unverified}
    return Plan(
        workload=workload,
        region=region,
        sonic_version=sonic_version,
        rows=rows,
        prices_file=prices_file,
        oldest_price=min((row.taken_on for row in used), default=None),
        price_age_days=price_age_days(used, today),
        unverified_prices=len(unverified),
        notes=notes,
    )


def streams_per_instance(
    settings: Settings, instance_type: str, measured: tuple[str, MeasuredConcurrency] | None
) -> StreamsPerInstance:
    """Concurrent streams one instance serves, and where the figure comes from."""
    catalogue = settings.catalogue
    row = catalogue.instance_types.get(instance_type)
    if row is None:
        raise ConfigError(
            file="command line",
            field="--instance-types",
            value=instance_type,
            problem="not in config/instance_types.toml",
            fix=f"use some of {', '.join(sorted(catalogue.instance_types))}, or add a row for it",
        )
    if measured is not None and measured[0] == instance_type:
        probe = measured[1]
        return StreamsPerInstance(
            probe.streams,
            f"probe: {probe.path.name}, TTFA p95 {probe.ttfa_p95_ms:g} ms <= {probe.budget_ms:g} ms",
        )
    sagemaker = settings.environment.sagemaker
    if instance_type == sagemaker.instance_type and sagemaker.streams_per_instance is not None:
        return StreamsPerInstance(
            sagemaker.streams_per_instance,
            f"environment {settings.environment_name}: sagemaker.streams_per_instance",
        )
    published = settings.catalogue_streams(instance_type)
    return StreamsPerInstance(published.streams, f"catalogue: {published.source}")
