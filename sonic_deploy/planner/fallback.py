"""What `[ecs.capacity.fallback]` costs while it runs: each overflow instance, and the audio it sends across AZs.

The fallback AZ runs no instance until the first AZ has no capacity, so its cost is per overflow instance-hour,
not a monthly figure. Its workers answer the API servers, which stay in the first AZ with the NLB and NATS: every
audio byte an overflow worker makes crosses from the fallback AZ to the first, and EC2 charges such a byte once
leaving one AZ and once entering the other (prices.toml `network.cross_az_gb`, per GB in each direction).
The requests' text going the other way is a few hundred bytes per utterance, left out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sonic_deploy.planner.capacity import StreamsPerInstance, Workload
from sonic_deploy.planner.costs import Overheads, PriceReader
from sonic_deploy.planner.price_table import InstanceKind, PriceLookup, PriceRow

CROSS_AZ_DIRECTIONS = 2  # each crossing byte is charged out of one AZ and into the other


@dataclass(frozen=True)
class FallbackTypeCost:
    """One overflow instance of `instance_type`, per hour while it runs full (at the target utilisation)."""

    instance_type: str
    pricing: str
    streams: float  # open streams it carries: streams per instance x target utilisation
    usd_per_instance_hour: float | None
    cross_az_gb_per_hour: float
    cross_az_usd_per_hour: float
    usd_per_hour: float | None  # instance + cross-AZ transfer; None without the instance's price


@dataclass(frozen=True)
class FallbackCost:
    availability_zone: str
    first_zone: str
    types: list[FallbackTypeCost]
    missing_prices: list[str] = field(default_factory=list)
    unverified: bool = False  # a price row it used is marked unverified in prices.toml


def fallback_cost(
    workload: Workload,
    first_zone: str,
    fallback_zone: str,
    streams: dict[str, StreamsPerInstance],
    market: str,
    prices: PriceLookup,
    overheads: Overheads,
    used: list[PriceRow],
) -> FallbackCost:
    """`streams`: the fallback's types, in its order, with the streams one instance of each serves."""
    kind: InstanceKind = "ec2_spot" if market == "spot" else "ec2_on_demand"
    reader = PriceReader(prices)
    per_gb = reader.read_or_zero("network.cross_az_gb", prices.network("cross_az_gb"))
    types = []
    for instance_type, figure in streams.items():
        rate = reader.read(f"{kind}.{instance_type}", prices.instance(kind, instance_type))
        open_streams = figure.count * workload.target_utilisation
        # The planner's audio model (Overheads.audio_bytes_per_second: 44.1 kHz pcm_s16le per open stream).
        gb_per_hour = open_streams * overheads.audio_bytes_per_second * 3600 / 1e9
        transfer = gb_per_hour * per_gb * CROSS_AZ_DIRECTIONS
        types.append(
            FallbackTypeCost(
                instance_type=instance_type,
                pricing=market,
                streams=open_streams,
                usd_per_instance_hour=rate,
                cross_az_gb_per_hour=gb_per_hour,
                cross_az_usd_per_hour=transfer,
                usd_per_hour=None if rate is None else rate + transfer,
            )
        )
    used.extend(reader.used)
    return FallbackCost(
        fallback_zone, first_zone, types, reader.missing, any(row.unverified for row in reader.used)
    )
