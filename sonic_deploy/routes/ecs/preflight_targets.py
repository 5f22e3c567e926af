"""What the ECS route will need in the account, as plain values taken from the settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from sonic_deploy.config import Settings
from sonic_deploy.routes.ecs.config import DEFAULT_GPU_AMI


@dataclass(frozen=True)
class ReservationTarget:
    """One `[[ecs.capacity.reservation]]`: what the config says the reservation is."""

    id: str
    availability_zone: str
    instance_type: str
    kind: Literal["on-demand", "capacity-block"] = "on-demand"


@dataclass(frozen=True)
class EcsTargets:
    instance_type: str
    availability_zone: str
    max_instances: int
    images: list[tuple[str, str]] = field(default_factory=list)  # (ECR repository name, tag)
    secret_names: list[str] = field(default_factory=list)
    images_copied_at_deploy: bool = False
    secrets_created_at_deploy: bool = False
    more_instance_types: list[str] = field(default_factory=list)  # ecs.capacity.instance_types
    fallback_zone: str | None = None
    fallback_instance_types: list[str] = field(default_factory=list)
    fallback_max_instances: int = 0
    reservations: list[ReservationTarget] = field(default_factory=list)
    reservation_preference: Literal["open", "targeted", "none"] = "open"
    ami: str = DEFAULT_GPU_AMI
    market: Literal["on-demand", "spot"] = "on-demand"

    @property
    def instance_types(self) -> list[str]:
        """The first AZ's GPU types, in the order the group tries them."""
        return list(dict.fromkeys([self.instance_type, *self.more_instance_types]))

    @property
    def zones_and_types(self) -> list[tuple[str, list[str]]]:
        """Each AZ the GPU groups launch in, with the types its group launches."""
        zones = [(self.availability_zone, self.instance_types)]
        if self.fallback_zone is not None:
            zones.append((self.fallback_zone, self.fallback_instance_types))
        return zones


def ecs_targets(settings: Settings) -> EcsTargets | None:
    """The ECS stack's needs: one worker per instance plus one spare instance for rolling deploys; images
    already in ECR unless the deploy copies them; secrets unless the stack creates them."""
    ecs = settings.environment.ecs
    if ecs is None or "ecs" not in settings.environment.routes:
        return None
    capacity = ecs.capacity
    first, *fallback_zone = ecs.zone_instance_types().items()
    return EcsTargets(
        instance_type=ecs.instance_type,
        availability_zone=ecs.availability_zone,
        max_instances=ecs.max_workers + 1,
        images=[]
        if ecs.copy_images
        else [(settings.ecr_repository(name, "ecs"), s.tag) for name, s in settings.ecs_services.items()],
        secret_names=([] if ecs.secrets.create else [ecs.secrets.api_key, ecs.secrets.registry_credentials])
        # Air-gapped: the licence secret is always the operator's (`sonic-deploy licence upload` makes it).
        + ([settings.licence_secret_name(ecs.secrets)] if ecs.licence_mode == "air-gapped" else []),
        images_copied_at_deploy=ecs.copy_images,
        secrets_created_at_deploy=ecs.secrets.create,
        more_instance_types=first[1][1:],
        fallback_zone=fallback_zone[0][0] if fallback_zone else None,
        fallback_instance_types=fallback_zone[0][1] if fallback_zone else [],
        # The fallback's GPU group has the first's maximum (routes/ecs/fleet.py: both max_workers), with the same
        # spare instance for a rolling deploy; both can run at once, so the quota counts both at their most.
        fallback_max_instances=ecs.max_workers + 1 if fallback_zone else 0,
        reservations=[
            ReservationTarget(r.id, r.availability_zone, r.instance_type, r.kind)
            for r in capacity.reservation
        ],
        reservation_preference=capacity.reservations,
        ami=capacity.ami,
        market=capacity.market,
    )
