"""Put a plan together: streams per instance for each type, then rows of instances and dollars per route."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from sonic_deploy.config import ConfigError, Settings
from sonic_deploy.planner.capacity import Figure, StreamsPerInstance, Workload
from sonic_deploy.planner.costs import Overheads, PlanRow, ecs_rows, eks_row, sagemaker_row
from sonic_deploy.planner.fallback import FallbackCost, fallback_cost
from sonic_deploy.planner.price_table import PriceLookup, PriceRow, PriceTable, price_age_days
from sonic_deploy.planner.probe_summary import MeasuredConcurrency
from sonic_deploy.routes.eks.config import EksClusterConfig

DEFAULT_INSTANCE_TYPES = ("ml.g6e.xlarge", "g6e.xlarge", "g6.xlarge")


@dataclass(frozen=True)
class Plan:
    workload: Workload
    region: str
    sonic_version: str
    rows: list[PlanRow]
    streams: dict[str, StreamsPerInstance]
    streams_notes: list[str]
    prices_file: Path
    oldest_price: date | None
    price_age_days: int | None
    unverified_prices: int
    notes: list[str]
    fallback: FallbackCost | None = None
    fallback_notes: list[str] = field(default_factory=list)


def build_plan(
    settings: Settings,
    table: PriceTable,
    prices_file: Path,
    workload: Workload,
    region: str,
    instance_types: list[str],
    overheads: Overheads,
    today: date,
    measured: tuple[str, MeasuredConcurrency] | None = None,
) -> Plan:
    lookup = PriceLookup(table, prices_file, region)
    sonic_version = settings.environment.sonic_version
    used: list[PriceRow] = []
    rows: list[PlanRow] = []
    streams_by_type: dict[str, StreamsPerInstance] = {}
    cluster, cluster_source = eks_cluster(settings)
    eks_types = []
    for instance_type in instance_types:
        streams = streams_by_type[instance_type] = streams_per_instance(settings, instance_type, measured)
        if instance_type.startswith("ml."):
            rows.append(sagemaker_row(workload, instance_type, streams, lookup, sonic_version, used))
        else:
            rows.extend(ecs_rows(workload, instance_type, streams, lookup, overheads, used))
            # EKS takes one-GPU types only (a NodePool each; eks.capacity's rule), one worker per node.
            if settings.catalogue.instance_types[instance_type].gpus == 1:
                rows.append(eks_row(workload, instance_type, streams, lookup, overheads, cluster, used))
                eks_types.append(instance_type)
    fallback, fallback_notes = _fallback(settings, workload, lookup, overheads, used, measured)
    notes: list[str] = []
    missing = sorted(
        {label for row in rows for label in row.missing_prices}
        | set(fallback.missing_prices if fallback else [])
    )
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
    if eks_types:
        notes.append(_eks_note(cluster, cluster_source))
    capacity = settings.environment.sagemaker.capacity
    if capacity.ml_reservation_arn is not None:
        notes.append(
            f"sagemaker.capacity.ml_reservation_arn: the endpoint's instances come only from the training plan "
            f"{capacity.ml_reservation_arn.rsplit('/', 1)[1]}, paid up front (`plan --price-reservation` prices "
            "its UpfrontFee); the SageMaker rows' hourly prices are what the same instances cost without it."
        )
    unverified = {row for row in used if row.unverified}
    return Plan(
        workload=workload,
        region=region,
        sonic_version=sonic_version,
        rows=rows,
        streams=streams_by_type,
        streams_notes=streams_notes(settings, streams_by_type),
        prices_file=prices_file,
        oldest_price=min((row.taken_on for row in used), default=None),
        price_age_days=price_age_days(used, today),
        unverified_prices=len(unverified),
        notes=notes,
        fallback=fallback,
        fallback_notes=fallback_notes,
    )


def eks_cluster(settings: Settings) -> tuple[EksClusterConfig, str]:
    """The cluster the EKS rows price, and where its settings come from: the environment's `[eks.cluster]`,
    else the model's defaults (a new cluster with 2 x m7i.xlarge system nodes)."""
    eks = settings.environment.eks
    if eks is None:
        return EksClusterConfig(), f"environment {settings.environment_name} has no [eks]: the defaults"
    return eks.cluster, f"environment {settings.environment_name}'s [eks.cluster]"


def _eks_note(cluster: EksClusterConfig, source: str) -> str:
    if cluster.existing is not None:
        fixed = (
            f"[eks.cluster] existing = {cluster.existing!r}: the cluster is yours already, so its control plane "
            f"is not charged here; the stack's {cluster.system_nodes} x {cluster.system_instance_type} system "
            "nodes are"
        )
    else:
        fixed = (
            "a new cluster: its control plane at the standard-support rate (prices.toml eks.cluster_hour; a "
            "Kubernetes version in extended support costs more per cluster-hour, not priced here) and "
            f"{cluster.system_nodes} x {cluster.system_instance_type} system nodes On-Demand (Karpenter, the "
            "controllers, the API server and NATS: no Fargate)"
        )
    return (
        f"EKS rows ({source}): On-Demand GPU nodes, one worker per node as on ECS, so the ECS row's instances; "
        f"{fixed}; NAT gateway, NLB and CloudWatch as ECS's."
    )


def _fallback(
    settings: Settings,
    workload: Workload,
    lookup: PriceLookup,
    overheads: Overheads,
    used: list[PriceRow],
    measured: tuple[str, MeasuredConcurrency] | None,
) -> tuple[FallbackCost | None, list[str]]:
    """The environment's `[ecs.capacity.fallback]`, priced per overflow instance-hour; None without one."""
    ecs = settings.environment.ecs
    if ecs is None or ecs.capacity.fallback is None:
        return None, []
    fallback = ecs.capacity.fallback
    types = ecs.zone_instance_types()[fallback.availability_zone]
    known = [name for name in types if name in settings.catalogue.instance_types]
    notes = [
        f"Fallback type {name} is not in config/instance_types.toml: no streams figure, so not priced."
        for name in types
        if name not in known
    ]
    streams = {name: streams_per_instance(settings, name, measured) for name in known}
    cost = fallback_cost(
        workload,
        ecs.availability_zone,
        fallback.availability_zone,
        streams,
        ecs.capacity.market,
        lookup,
        overheads,
        used,
    )
    return cost, notes


def streams_per_instance(
    settings: Settings, instance_type: str, measured: tuple[str, MeasuredConcurrency] | None
) -> StreamsPerInstance:
    """Concurrent streams one instance serves, and where the figure comes from: a probe of this type, else
    the environment's `sagemaker.streams_per_instance` for its SageMaker type, else the catalogue's figure for
    the environment's Sonic version. Whatever wins, the figures it replaced and the published figures that
    contradict the catalogue's come with it."""
    catalogue = settings.catalogue
    if instance_type not in catalogue.instance_types:
        raise ConfigError(
            file="command line",
            field="--instance-types",
            value=instance_type,
            problem="not in config/instance_types.toml",
            fix=f"use some of {', '.join(sorted(catalogue.instance_types))}, or add a row for it",
        )
    published = settings.catalogue_streams(instance_type)
    figures = [Figure("catalogue", published.streams, published.source)]
    sagemaker = settings.environment.sagemaker
    if instance_type == sagemaker.instance_type and sagemaker.streams_per_instance is not None:
        figures.insert(
            0,
            Figure(
                "configured",
                sagemaker.streams_per_instance,
                f"environment {settings.environment_name}: sagemaker.streams_per_instance",
            ),
        )
    if measured is not None and measured[0] == instance_type:
        probe = measured[1]
        figures.insert(
            0,
            Figure(
                "measured",
                probe.streams,
                probe.describe(),
            ),
        )
    used, *replaced = figures
    return StreamsPerInstance(
        used.streams,
        used.source,
        basis=used.basis,
        replaces=tuple(replaced),
        contradicted_by=published.alternatives,
    )


def streams_notes(settings: Settings, streams: dict[str, StreamsPerInstance]) -> list[str]:
    """What the user should know about the figures the plan used: how to replace a published one with a
    measurement, and whether the deployed scaling follows a measured one."""
    notes = []
    published = [name for name, figure in streams.items() if figure.basis == "catalogue"]
    if published:
        contradicted = [name for name in published if streams[name].contradicted_by]
        notes.append(
            f"Streams per instance for {', '.join(published)} are published figures, not measurements"
            + (f" (published figures disagree for {', '.join(contradicted)})" if contradicted else "")
            + ". To replace one with a measurement: probe ONE instance of the type (`sonic-deploy probe "
            "sagemaker --endpoint NAME --concurrency 1,2,4,8,12,16`, or `sonic-deploy probe ws --url "
            "ws://HOST/tts/websocket ...` for ECS), then `sonic-deploy plan --probe OUT/summary.json "
            "--probe-instance-type TYPE`: the measured figure replaces the catalogue's for that type."
        )
    env = settings.environment
    measured = streams.get(env.sagemaker.instance_type)
    if measured is not None and measured.basis == "measured":
        deployed = settings.sagemaker_streams_per_instance
        if deployed != measured.count:
            notes.append(
                f"The SageMaker scaling of environment {settings.environment_name} still targets {deployed} "
                f"streams per {env.sagemaker.instance_type}, not the measured {measured.count}: set "
                f"`streams_per_instance = {measured.count}` under [sagemaker] in "
                f"config/environments/{settings.environment_name}.toml to deploy with it."
            )
    return notes
