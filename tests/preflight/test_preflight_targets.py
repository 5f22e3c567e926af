"""EcsTargets from the settings: what preflight looks for is what the ECS stack will need."""

from __future__ import annotations

from sonic_deploy.config import load_settings
from sonic_deploy.preflight.targets import ecs_targets
from tests.conftest import CONFIG_DIR, EditConfig


def test_shipped_dev_environment() -> None:
    targets = ecs_targets(load_settings(CONFIG_DIR, "dev"))
    assert targets is not None
    assert (targets.instance_type, targets.availability_zone) == ("g6e.xlarge", "us-east-2a")
    assert targets.max_instances == 7  # six workers, one per instance, and one spare instance for deploys
    assert targets.images == [] and targets.images_copied_at_deploy
    assert targets.secret_names == ["sonic/dev/cartesia-api-key", "sonic/dev/cartesia-registry"]


def test_images_copied_by_hand_are_checked_in_the_stacks_repositories(edit_config: EditConfig) -> None:
    config = edit_config("environments/dev.toml", "copy_images = true", "copy_images = false")
    targets = ecs_targets(load_settings(config, "dev"))
    assert targets is not None and not targets.images_copied_at_deploy
    assert ("sonic-dev/gpu-worker", "REPLACE-ME") in targets.images
    assert ("sonic-dev/nats", "2.10-alpine") in targets.images
    assert len(targets.images) == 5


def test_no_targets_without_the_ecs_route() -> None:
    assert ecs_targets(load_settings(CONFIG_DIR, "prod")) is None
