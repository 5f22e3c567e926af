"""What the ECS route will need in the account, as plain values taken from the settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from sonic_deploy.config import Settings


@dataclass(frozen=True)
class EcsTargets:
    instance_type: str
    availability_zone: str
    max_instances: int
    images: list[tuple[str, str]] = field(default_factory=list)  # (ECR repository name, tag)
    secret_names: list[str] = field(default_factory=list)
    images_copied_at_deploy: bool = False
    secrets_created_at_deploy: bool = False


def ecs_targets(settings: Settings) -> EcsTargets | None:
    """The ECS stack's needs: one worker per instance plus one spare instance for rolling deploys; images
    already in ECR unless the deploy copies them; secrets unless the stack creates them."""
    ecs = settings.environment.ecs
    if ecs is None or "ecs" not in settings.environment.routes:
        return None
    return EcsTargets(
        instance_type=ecs.instance_type,
        availability_zone=ecs.availability_zone,
        max_instances=ecs.max_workers + 1,
        images=[]
        if ecs.copy_images
        else [(settings.ecr_repository(name), s.tag) for name, s in settings.ecs_services.items()],
        secret_names=([] if ecs.secrets.create else [ecs.secrets.api_key, ecs.secrets.registry_credentials])
        # Air-gapped: the licence secret is always the operator's (`sonic-deploy licence upload` makes it).
        + ([settings.licence_secret_name] if ecs.licence_mode == "air-gapped" else []),
        images_copied_at_deploy=ecs.copy_images,
        secrets_created_at_deploy=ecs.secrets.create,
    )
