"""The ML reservation's price (`sagemaker.capacity.ml_reservation_arn`: a SageMaker training plan reserved for
endpoints), as `plan --price-reservation` reads it with DescribeTrainingPlan: its up-front fee over its hours,
beside the same instances on demand (docs/capacity.md, SageMaker: what each option costs)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy_boto3_sagemaker import SageMakerClient


@dataclass(frozen=True)
class Reservation:
    name: str
    fee: float  # the plan's UpfrontFee, paid whether the instances are used or not
    currency: str
    hours: float
    instances: dict[str, int]  # instance type -> instances reserved


def describe(sagemaker: SageMakerClient, arn: str) -> Reservation:
    """The training plan `arn` names (a ClientError goes to the caller: the command says what to fix)."""
    name = arn.rsplit("/", 1)[1]
    plan = sagemaker.describe_training_plan(TrainingPlanName=name)
    instances: Counter[str] = Counter()
    for summary in plan.get("ReservedCapacitySummaries", []):
        instances[summary.get("InstanceType", "?")] += summary.get("TotalInstanceCount", 0)
    return Reservation(
        name=name,
        fee=float(plan.get("UpfrontFee") or 0.0),  # a decimal string in the API
        currency=plan.get("CurrencyCode", "USD"),
        hours=plan.get("DurationHours", 0) + plan.get("DurationMinutes", 0) / 60,
        instances=dict(instances),
    )


def reservation_note(reservation: Reservation, on_demand_usd: Callable[[str], float | None]) -> str:
    """One line: the fee, per hour and per instance-hour, and the share of its instance-hours the endpoint
    must use for the plan to cost less than the same instances on demand (`on_demand_usd`: $/hour by type)."""
    r = reservation
    held = ", ".join(f"{count} x {kind}" for kind, count in sorted(r.instances.items())) or "no instances"
    instance_hours = r.hours * sum(r.instances.values())
    if r.hours <= 0 or instance_hours <= 0:
        return f"reservation {r.name}: {r.fee:,.2f} {r.currency} up front for {held} over {r.hours:g} h"
    per_instance_hour = r.fee / instance_hours
    line = (
        f"reservation {r.name}: {r.fee:,.2f} {r.currency} up front for {held} over {r.hours:g} h: "
        f"{r.fee / r.hours:,.2f} an hour, {per_instance_hour:,.3f} an instance-hour"
    )
    on_demand = {kind: usd if (usd := on_demand_usd(kind)) else None for kind in r.instances}  # $0: no price
    if r.currency != "USD" or None in on_demand.values():
        missing = [kind for kind, usd in on_demand.items() if usd is None]
        why = f"no on-demand price for {', '.join(missing)}" if missing else f"the fee is in {r.currency}"
        return f"{line} (not compared with on demand: {why})"
    rate = sum(usd * r.instances[kind] for kind, usd in on_demand.items() if usd is not None) * r.hours
    share = r.fee / rate
    line += f"; on demand the same instances cost {rate / instance_hours:,.3f} an instance-hour: "
    if share > 1:
        return line + f"the plan costs more even fully used ({share:.0%} of on demand)"
    return line + f"the plan costs less once the endpoint uses more than {share:.0%} of its instance-hours"
