"""EcsTargets from the settings: what preflight looks for is what the ECS stack will need."""

from __future__ import annotations

from sonic_deploy.config import load_settings
from sonic_deploy.routes.ecs.preflight_targets import ReservationTarget, ecs_targets
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


def test_capacity_settings_reach_the_targets(edit_config: EditConfig) -> None:
    config = edit_config(
        "environments/dev.toml",
        "[ecs.api]",
        '[ecs.capacity]\ninstance_types = ["g6e.2xlarge"]\nreservations = "targeted"\n'
        '[[ecs.capacity.reservation]]\nid = "cr-0123456789abcdef0"\navailability_zone = "us-east-2a"\n'
        'instance_type = "g6e.2xlarge"\n[ecs.capacity.fallback]\navailability_zone = "us-east-2b"\n\n[ecs.api]',
    )
    targets = ecs_targets(load_settings(config, "dev"))
    assert targets is not None
    assert targets.instance_types == ["g6e.xlarge", "g6e.2xlarge"]
    # The fallback's types default to the first AZ's, and its group counts as large as the first.
    assert targets.zones_and_types == [
        ("us-east-2a", ["g6e.xlarge", "g6e.2xlarge"]),
        ("us-east-2b", ["g6e.xlarge", "g6e.2xlarge"]),
    ]
    assert targets.fallback_max_instances == targets.max_instances == 7
    assert targets.reservation_preference == "targeted"
    assert targets.reservations == [
        ReservationTarget("cr-0123456789abcdef0", "us-east-2a", "g6e.2xlarge", "on-demand")
    ]


def test_no_fallback_by_default() -> None:
    targets = ecs_targets(load_settings(CONFIG_DIR, "dev"))
    assert targets is not None
    assert targets.zones_and_types == [("us-east-2a", ["g6e.xlarge"])]
    assert (targets.fallback_max_instances, targets.reservations) == (0, [])
