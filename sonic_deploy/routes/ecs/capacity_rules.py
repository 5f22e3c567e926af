"""The rules of the ECS route's `[ecs.capacity]` table: where the GPU instances come from."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sonic_deploy.config.base import DEFAULT_ENVIRONMENT
from sonic_deploy.config.catalogue import InstanceCatalogue
from sonic_deploy.config.errors import MISSING, Fail
from sonic_deploy.routes.ecs.rules import check_ecs_gpu_type, check_worker_fits

if TYPE_CHECKING:
    from sonic_deploy.config.schema import EnvironmentConfig


def check_ecs_capacity(
    fail: Fail, name: str, env: EnvironmentConfig, catalogue: InstanceCatalogue, zones: list[str]
) -> None:
    """`[ecs.capacity]`: every type usable by the worker, Spot only in the default environment, reservations
    in an AZ and of a type a group launches, Capacity Blocks only for types that offer them, the fallback AZ
    another of the VPC's (docs/routes.md, "The single-AZ trade-off")."""
    ecs = env.ecs
    if ecs is None:
        return
    capacity = ecs.capacity
    table = "ecs.capacity"
    for index, instance_type in enumerate(capacity.instance_types):
        check_ecs_gpu_type(fail, f"{table}.instance_types[{index}]", instance_type, catalogue)
        check_worker_fits(fail, ecs, instance_type, catalogue)
    first = [ecs.instance_type, *capacity.instance_types]
    if len(set(first)) != len(first):
        fail(
            f"{table}.instance_types",
            capacity.instance_types,
            f"lists a type twice, or ecs.instance_type ({ecs.instance_type}) again",
            "list each further type once; ecs.instance_type is always tried first",
        )
    fallback = capacity.fallback
    if fallback is not None:
        field = f"{table}.fallback.availability_zone"
        if fallback.availability_zone == ecs.availability_zone:
            fail(
                field,
                fallback.availability_zone,
                "the same AZ as ecs.availability_zone: a fallback must be another AZ",
                f"use another of the VPC's AZs: {', '.join(z for z in zones if z != ecs.availability_zone)}",
            )
        if fallback.availability_zone not in zones:
            fail(
                field,
                fallback.availability_zone,
                "not one of the VPC's Availability Zones",
                f"use one of {', '.join(z for z in zones if z != ecs.availability_zone)}, or add it to the VPC's "
                "availability_zones",
            )
        for index, instance_type in enumerate(fallback.instance_types):
            check_ecs_gpu_type(fail, f"{table}.fallback.instance_types[{index}]", instance_type, catalogue)
            check_worker_fits(fail, ecs, instance_type, catalogue)
        scale_out_s = ecs.instance_warmup_s + ecs.worker_start_period_s
        if fallback.after_minutes * 60 <= scale_out_s:
            fail(
                f"{table}.fallback.after_minutes",
                fallback.after_minutes,
                f"no longer than a normal scale-out in the first AZ (instance_warmup_s + worker_start_period_s "
                f"= {scale_out_s} s): every scale-out would start overflow workers in the fallback AZ",
                f"set it to {scale_out_s // 60 + 1} or more",
            )
        if len(set(fallback.instance_types)) != len(fallback.instance_types):
            fail(
                f"{table}.fallback.instance_types",
                fallback.instance_types,
                "lists a type twice",
                "list each type once",
            )
    if capacity.market == "spot" and name != DEFAULT_ENVIRONMENT:
        fail(
            f"{table}.market",
            "spot",
            f"Spot instances are interrupted with two minutes' notice: only the default environment "
            f"({DEFAULT_ENVIRONMENT}) may use them",
            'set market = "on-demand" (or leave it out)',
        )
    if capacity.reservations != "targeted" and capacity.reservations_only:
        fail(
            f"{table}.reservations_only",
            True,
            f'only targeted reservations can be the only capacity (reservations = "{capacity.reservations}")',
            'set reservations = "targeted" and list them, or leave reservations_only out',
        )
    if capacity.reservations == "targeted" and not capacity.reservation:
        fail(
            f"{table}.reservation",
            MISSING,
            'reservations = "targeted" but no reservation is listed',
            "add [[ecs.capacity.reservation]] tables (id, availability_zone, instance_type), or set "
            'reservations = "open"',
        )
    if capacity.reservation and capacity.market == "spot":
        fail(
            f"{table}.market",
            "spot",
            "capacity reservations hold On-Demand (or Capacity Block) capacity, which Spot instances do not use",
            'set market = "on-demand", or remove the [[ecs.capacity.reservation]] tables',
        )
    if capacity.reservation and capacity.reservations == "none":
        fail(
            f"{table}.reservations",
            "none",
            "reservations are listed but the groups are told never to use one",
            'set reservations = "targeted" (or "open"), or remove the [[ecs.capacity.reservation]] tables',
        )
    by_zone = ecs.zone_instance_types()
    seen: set[str] = set()
    for index, reservation in enumerate(capacity.reservation):
        entry = f"{table}.reservation[{index}]"
        if reservation.id in seen:
            fail(f"{entry}.id", reservation.id, "listed twice", "list each reservation once")
        seen.add(reservation.id)
        types = by_zone.get(reservation.availability_zone)
        if types is None:
            fail(
                f"{entry}.availability_zone",
                reservation.availability_zone,
                "no GPU group launches in this AZ, so the reservation would never be used",
                f"use {' or '.join(by_zone)} (ecs.availability_zone"
                + (", or the fallback's)" if fallback else ")")
                + ", or remove the reservation",
            )
        if reservation.instance_type not in types:
            fail(
                f"{entry}.instance_type",
                reservation.instance_type,
                f"the group in {reservation.availability_zone} does not launch this type ({', '.join(types)})",
                "add it to the group's instance types, or correct the type",
            )
        if reservation.kind == "capacity-block":
            fail(
                f"{entry}.kind",
                "capacity-block",
                'EC2 offers Capacity Blocks for ML for P and Trn types only (EC2 User Guide, "Capacity Blocks for '
                'ML"), and the ECS route runs G types',
                'use kind = "on-demand" with an On-Demand Capacity Reservation',
            )
    if capacity.reservations_only:
        bare = [zone for zone in by_zone if not ecs.reservation_ids(zone)]
        if bare:
            fail(
                f"{table}.reservations_only",
                True,
                f"the group in {', '.join(bare)} has no listed reservation, so with only reservations it could "
                "never launch",
                f"list a reservation in {', '.join(bare)}, or leave reservations_only out (reservations first, "
                "then On-Demand)",
            )
