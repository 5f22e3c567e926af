"""What the ECS route will need in the account, as plain values (settings are mapped to this at merge time)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EcsTargets:
    instance_type: str
    availability_zone: str
    max_instances: int
    images: list[tuple[str, str]] = field(default_factory=list)  # (ECR repository name, tag)
    secret_names: list[str] = field(default_factory=list)
