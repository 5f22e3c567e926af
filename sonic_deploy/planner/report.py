"""A plan as a terminal table or as JSON."""

from __future__ import annotations

import dataclasses
from typing import Any

from sonic_deploy.planner.capacity import HOURS_PER_MONTH
from sonic_deploy.planner.fallback import FallbackCost
from sonic_deploy.planner.plan import Plan

COLUMNS = (
    "route",
    "instance type",
    "streams/inst",
    "instances peak/off",
    "pricing",
    "$/hour peak",
    "$/month",
    "$/1k speech-min",
)


def plan_as_json(plan: Plan) -> dict[str, Any]:
    workload = plan.workload
    return {
        "region": plan.region,
        "sonic_version": plan.sonic_version,
        "workload": {
            **dataclasses.asdict(workload),
            "open_streams_at_peak": workload.open_streams(workload.peak_calls),
            "requests_per_second_at_peak": workload.requests_per_second(workload.peak_calls),
            "speech_minutes_per_month": workload.speech_minutes_per_month(),
            "hours_per_month": HOURS_PER_MONTH,
        },
        "prices": {
            "file": str(plan.prices_file),
            "oldest_taken_on": plan.oldest_price.isoformat() if plan.oldest_price else None,
            "age_days": plan.price_age_days,
            "unverified_rows_used": plan.unverified_prices,
        },
        "streams_per_instance": {
            instance_type: {
                "streams": figure.count,
                "basis": figure.basis,
                "source": figure.source,
                "replaces": [dataclasses.asdict(other) for other in figure.replaces],
                "contradicted_by": [alt.model_dump() for alt in figure.contradicted_by],
            }
            for instance_type, figure in plan.streams.items()
        },
        "rows": [dataclasses.asdict(row) for row in plan.rows],
        "fallback": dataclasses.asdict(plan.fallback) if plan.fallback else None,
        "notes": [*plan.streams_notes, *plan.fallback_notes, *plan.notes],
    }


def plan_as_table(plan: Plan) -> str:
    workload = plan.workload
    lines = [
        f"Sonic capacity and cost plan: {plan.region}, {plan.sonic_version}",
        f"  {workload.peak_calls} concurrent calls at peak ({workload.peak_hours:g} h/day), "
        f"{workload.offpeak_calls:g} off-peak ({workload.offpeak_hours:g} h/day), "
        f"agent speaking {workload.speaking_share:.0%} of the time, {workload.utterance_seconds:g} s utterances",
        f"  => {workload.open_streams(workload.peak_calls):g} open Sonic streams and "
        f"{workload.requests_per_second(workload.peak_calls):.1f} requests/s at peak, sized to "
        f"{workload.target_utilisation:.0%} utilisation, N+1, at least 2 instances",
        "",
    ]
    cells = [COLUMNS]
    for row in plan.rows:
        flag = "*" if row.unverified else ""
        cells.append(
            (
                row.route,
                row.instance_type,
                str(row.streams_per_instance),
                f"{row.peak_instances} / {row.offpeak_instances}",
                row.pricing,
                _money(row.usd_per_hour_at_peak, flag),
                _money(row.usd_per_month, flag, whole=True),
                _money(row.usd_per_1000_speech_minutes, flag),
            )
        )
    widths = [max(len(cell[i]) for cell in cells) for i in range(len(COLUMNS))]
    numeric = {5, 6, 7}
    for index, cell in enumerate(cells):
        lines.append(
            "  ".join(
                text.rjust(widths[i]) if i in numeric else text.ljust(widths[i])
                for i, text in enumerate(cell)
            ).rstrip()
        )
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    lines.append("")
    if plan.fallback is not None:
        lines.extend(_fallback_lines(plan.fallback))
        lines.extend(plan.fallback_notes)
        lines.append("")
    lines.append("Streams per instance:")
    for instance_type, figure in plan.streams.items():
        lines.append(f"  {instance_type}: {figure.count}, {figure.basis} ({figure.source})")
        lines.extend(
            f"    replaces {other.basis}: {other.streams} ({other.source})" for other in figure.replaces
        )
        lines.extend(f"    contradicted by: {alt.streams} ({alt.source})" for alt in figure.contradicted_by)
    lines.extend(plan.streams_notes)
    lines.append(_price_line(plan))
    lines.extend(plan.notes)
    return "\n".join(lines)


def _fallback_lines(fallback: FallbackCost) -> list[str]:
    lines = [
        f"Fallback AZ {fallback.availability_zone} ([ecs.capacity.fallback]): no instance until "
        f"{fallback.first_zone} has no GPU capacity; then per overflow instance-hour, running full, with its "
        f"audio crossing to the API servers in {fallback.first_zone} (charged out of one AZ and into the other):"
    ]
    flag = "*" if fallback.unverified else ""
    for cost in fallback.types:
        transfer = (
            f"${cost.cross_az_usd_per_hour:,.3f}{flag} cross-AZ ({cost.cross_az_gb_per_hour:.2f} GB/h for "
            f"{cost.streams:g} streams)"
        )
        if cost.usd_per_instance_hour is None or cost.usd_per_hour is None:
            priced = f"no {cost.pricing} price for the instance (see below) + {transfer}"
        else:
            priced = (
                f"${cost.usd_per_instance_hour:,.2f}{flag} instance + {transfer} = "
                f"${cost.usd_per_hour:,.2f}{flag}/hour"
            )
        lines.append(f"  {cost.instance_type} ({cost.pricing}): {priced}")
    return lines


def _price_line(plan: Plan) -> str:
    if plan.oldest_price is None:
        return f"No prices for {plan.region} in {plan.prices_file}."
    text = (
        f"Prices: {plan.prices_file}, oldest taken {plan.oldest_price.isoformat()} "
        f"({plan.price_age_days} days ago); `--refresh-prices` updates them."
    )
    if plan.unverified_prices:
        text += (
            f" * uses {plan.unverified_prices} unverified price rows (not read from AWS: see each row's "
            "source)."
        )
    return text


def _money(value: float | None, flag: str, whole: bool = False) -> str:
    if value is None:
        return "n/a"
    return (f"{value:,.0f}" if whole else f"{value:,.2f}") + flag
