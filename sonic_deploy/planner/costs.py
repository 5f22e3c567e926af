"""What each route and instance type costs for a workload: instances from `capacity`, prices from the table."""

from __future__ import annotations

from dataclasses import dataclass, field

from sonic_deploy.config.schema import Route  # the registered routes' names (tests/routes/test_registry.py)
from sonic_deploy.planner.capacity import (
    HOURS_PER_DAY,
    HOURS_PER_MONTH,
    DailyProfile,
    StreamsPerInstance,
    Workload,
    daily_profile,
)
from sonic_deploy.planner.price_table import InstanceKind, PriceLookup, PriceRow
from sonic_deploy.routes.eks.config import EksClusterConfig

# NLB capacity units for TCP: one NLCU buys 800 new flows a second, 100,000 active flows or 1 GB an hour.
NLCU_NEW_FLOWS_PER_SECOND = 800
NLCU_ACTIVE_FLOWS = 100_000
NLCU_GB_PER_HOUR = 1.0

ECS_PRICINGS: tuple[tuple[str, InstanceKind], ...] = (
    ("on-demand", "ec2_on_demand"),
    ("spot", "ec2_spot"),
    ("savings plan 1y", "ec2_savings_plan_1y"),
)


@dataclass(frozen=True)
class Overheads:
    """What a self-hosted route (ECS, EKS) runs besides GPU instances and pays for alike, in quantities; prices
    come from the table. Neither route's interface VPC endpoints are priced (docs/deploy.md, "Not in the plan"),
    nor the ECS route's Fargate tasks (the API server and NATS; on EKS they run on the system nodes)."""

    nat_gateways: int = 1  # one AZ (placement group): one NAT gateway
    nat_gb_per_month: float = 100.0  # image pulls and licence traffic through NAT
    audio_bytes_per_second: int = 88_200  # 44.1 kHz pcm_s16le mono through the NLB
    metrics_per_instance: int = 10  # CloudWatch agent GPU metrics and scraped worker metrics
    alarms: int = 10
    log_gb_per_instance_month: float = 2.0


@dataclass(frozen=True)
class PlanRow:
    """One line of the plan: a route, an instance type and a way of paying for it."""

    route: Route
    instance_type: str
    pricing: str
    streams_per_instance: int
    streams_source: str
    peak_instances: int
    offpeak_instances: int
    usd_per_hour_at_peak: float | None
    usd_per_month: float | None
    usd_per_1000_speech_minutes: float | None
    monthly_breakdown: dict[str, float] = field(default_factory=dict)
    missing_prices: list[str] = field(default_factory=list)
    unverified: bool = False


class PriceReader:
    """Looks prices up, noting the rows used (for their age) and the ones missing (for the user)."""

    def __init__(self, prices: PriceLookup) -> None:
        self.prices = prices
        self.used: list[PriceRow] = []
        self.missing: list[str] = []

    def read(self, label: str, row: PriceRow | None) -> float | None:
        if row is None:
            self.missing.append(label)
            return None
        self.used.append(row)
        return row.usd

    def read_or_zero(self, label: str, row: PriceRow | None) -> float:
        """For the smaller costs: a missing row counts as nothing, and is reported as missing."""
        return self.read(label, row) or 0.0


def sagemaker_row(
    workload: Workload,
    instance_type: str,
    streams: StreamsPerInstance,
    prices: PriceLookup,
    sonic_version: str,
    used: list[PriceRow],
) -> PlanRow:
    profile = daily_profile(workload, streams.count)
    reader = PriceReader(prices)
    hosting = reader.read(
        f"sagemaker_hosting.{instance_type}", prices.instance("sagemaker_hosting", instance_type)
    )
    fee = reader.read(
        f'marketplace."{sonic_version}".{instance_type} (software fee)',
        prices.software_fee(sonic_version, instance_type),
    )
    used.extend(reader.used)
    breakdown: dict[str, float] = {}
    hourly = monthly = None
    if hosting is not None:
        rate = hosting + (fee or 0.0)
        hours = profile.instance_hours_per_month(workload)
        breakdown = {"instances": hours * hosting, "software fee": hours * (fee or 0.0)}
        hourly, monthly = profile.peak.total * rate, hours * rate
    return _row(
        "sagemaker",
        instance_type,
        "on-demand + fee" if fee is not None else "on-demand, no fee",
        streams,
        profile,
        workload,
        hourly,
        monthly,
        breakdown,
        reader,
    )


def ecs_rows(
    workload: Workload,
    instance_type: str,
    streams: StreamsPerInstance,
    prices: PriceLookup,
    overheads: Overheads,
    used: list[PriceRow],
) -> list[PlanRow]:
    profile = daily_profile(workload, streams.count)
    rows = []
    for pricing, kind in ECS_PRICINGS:
        reader = PriceReader(prices)
        rate = reader.read(f"{kind}.{instance_type}", prices.instance(kind, instance_type))
        fixed_monthly, fixed_at_peak = _shared_overheads(workload, profile, overheads, reader)
        used.extend(reader.used)
        hourly = monthly = None
        breakdown: dict[str, float] = {}
        if rate is not None:
            hours = profile.instance_hours_per_month(workload)
            breakdown = {"instances": hours * rate, **fixed_monthly}
            monthly = sum(breakdown.values())
            hourly = profile.peak.total * rate + fixed_at_peak
        rows.append(
            _row(
                "ecs", instance_type, pricing, streams, profile, workload, hourly, monthly, breakdown, reader
            )
        )
    return rows


def eks_row(
    workload: Workload,
    instance_type: str,
    streams: StreamsPerInstance,
    prices: PriceLookup,
    overheads: Overheads,
    cluster: EksClusterConfig,
    used: list[PriceRow],
) -> PlanRow:
    """The EKS route on On-Demand GPU nodes: Karpenter launches one node per GPU worker, as ECS runs one worker
    task per instance, so the GPU nodes are the ECS row's instances (the same N+1 and minimum of two). On top of
    the shared overheads come its own fixed costs: the control plane at the standard-support rate (a Kubernetes
    version in extended support costs more per cluster-hour, not priced here) and the `system` managed node
    group, On-Demand, which runs the API server and NATS (no Fargate). For a cluster named in `[eks.cluster]
    existing` the control plane is not charged here (it is yours already); the stack still adds its system
    nodes (constructs/cluster.py)."""
    profile = daily_profile(workload, streams.count)
    reader = PriceReader(prices)
    kind: InstanceKind = "ec2_on_demand"
    rate = reader.read(f"{kind}.{instance_type}", prices.instance(kind, instance_type))
    if cluster.existing is None:
        plane = (
            "EKS control plane (standard support)",
            reader.read("eks.cluster_hour", prices.eks("cluster_hour")),
        )
    else:
        plane = (f"EKS control plane (existing cluster {cluster.existing}: not charged here)", 0.0)
    system_node = reader.read(
        f"{kind}.{cluster.system_instance_type}", prices.instance(kind, cluster.system_instance_type)
    )
    own = {
        plane[0]: plane[1],
        f"system nodes ({cluster.system_nodes} x {cluster.system_instance_type})": (
            None if system_node is None else cluster.system_nodes * system_node
        ),
    }
    fixed_monthly, fixed_at_peak = _shared_overheads(workload, profile, overheads, reader)
    used.extend(reader.used)
    hourly = monthly = None
    breakdown: dict[str, float] = {}
    if rate is not None and all(usd is not None for usd in own.values()):
        per_hour = {label: usd or 0.0 for label, usd in own.items()}
        hours = profile.instance_hours_per_month(workload)
        breakdown = {
            "instances": hours * rate,
            **{label: usd * HOURS_PER_MONTH for label, usd in per_hour.items()},
            **fixed_monthly,
        }
        monthly = sum(breakdown.values())
        hourly = profile.peak.total * rate + sum(per_hour.values()) + fixed_at_peak
    return _row(
        "eks", instance_type, "on-demand", streams, profile, workload, hourly, monthly, breakdown, reader
    )


def _shared_overheads(
    workload: Workload, profile: DailyProfile, overheads: Overheads, reader: PriceReader
) -> tuple[dict[str, float], float]:
    """Monthly NAT, NLB and CloudWatch costs, and their cost in an hour at peak: what the ECS and EKS routes
    both run besides their GPU instances."""
    price = reader.read_or_zero
    lookup = reader.prices
    nat_hour = price("network.nat_gateway_hour", lookup.network("nat_gateway_hour"))
    nat_gb = price("network.nat_gateway_gb", lookup.network("nat_gateway_gb"))
    nlb_hour = price("network.nlb_hour", lookup.network("nlb_hour"))
    nlcu_hour = price("network.nlcu_hour", lookup.network("nlcu_hour"))
    metric = price("cloudwatch.custom_metric_month", lookup.cloudwatch("custom_metric_month"))
    alarm = price("cloudwatch.alarm_month", lookup.cloudwatch("alarm_month"))
    log_gb = price("cloudwatch.logs_ingest_gb", lookup.cloudwatch("logs_ingest_gb"))

    days = HOURS_PER_MONTH / HOURS_PER_DAY
    nlcu_hours = days * (
        nlcus(workload, workload.peak_calls, overheads) * workload.peak_hours
        + nlcus(workload, workload.offpeak_calls, overheads) * workload.offpeak_hours
    )
    average_instances = profile.instance_hours_per_month(workload) / HOURS_PER_MONTH
    monthly = {
        "NAT gateway": overheads.nat_gateways * nat_hour * HOURS_PER_MONTH
        + overheads.nat_gb_per_month * nat_gb,
        "NLB": nlb_hour * HOURS_PER_MONTH + nlcu_hours * nlcu_hour,
        "CloudWatch": (
            overheads.metrics_per_instance * average_instances * metric
            + overheads.alarms * alarm
            + overheads.log_gb_per_instance_month * average_instances * log_gb
        ),
    }
    at_peak = (
        overheads.nat_gateways * nat_hour
        + overheads.nat_gb_per_month * nat_gb / HOURS_PER_MONTH
        + nlb_hour
        + nlcus(workload, workload.peak_calls, overheads) * nlcu_hour
        + (
            overheads.metrics_per_instance * profile.peak.total * metric
            + overheads.alarms * alarm
            + overheads.log_gb_per_instance_month * profile.peak.total * log_gb
        )
        / HOURS_PER_MONTH
    )
    return monthly, at_peak


def nlcus(workload: Workload, calls: float, overheads: Overheads) -> float:
    """NLB capacity units an hour for `calls` concurrent calls: the largest of the three TCP dimensions."""
    gb_per_hour = workload.open_streams(calls) * overheads.audio_bytes_per_second * 3600 / 1e9
    return max(
        gb_per_hour / NLCU_GB_PER_HOUR,
        workload.requests_per_second(calls) / NLCU_NEW_FLOWS_PER_SECOND,
        calls / NLCU_ACTIVE_FLOWS,
    )


def _row(
    route: Route,
    instance_type: str,
    pricing: str,
    streams: StreamsPerInstance,
    profile: DailyProfile,
    workload: Workload,
    hourly: float | None,
    monthly: float | None,
    breakdown: dict[str, float],
    reader: PriceReader,
) -> PlanRow:
    per_thousand = None
    speech_minutes = workload.speech_minutes_per_month()
    if monthly is not None and speech_minutes > 0:
        per_thousand = monthly / speech_minutes * 1000
    return PlanRow(
        route=route,
        instance_type=instance_type,
        pricing=pricing,
        streams_per_instance=streams.count,
        streams_source=streams.source,
        peak_instances=profile.peak.total,
        offpeak_instances=profile.offpeak.total,
        usd_per_hour_at_peak=hourly,
        usd_per_month=monthly,
        usd_per_1000_speech_minutes=per_thousand,
        monthly_breakdown=breakdown,
        missing_prices=reader.missing,
        unverified=any(row.unverified for row in reader.used),
    )
