"""[probe] and [canary]: the in-VPC probe task's size and the canary's schedule, request and alarm budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from sonic_deploy.config import Settings, load_settings
from tests.config.test_ecs_config import DEV, error_for
from tests.conftest import EditConfig

PROD = "environments/prod.toml"


def test_the_canary_is_off_in_dev_and_on_elsewhere(dev_settings: Settings, edit_config: EditConfig) -> None:
    assert dev_settings.canary_enabled is False
    config = edit_config(DEV, "# enabled = true", "enabled = true")
    assert load_settings(config, "dev").canary_enabled is True
    config = edit_config(PROD, "[canary]\n", "[canary]\nenabled = false\n")
    assert load_settings(config, "prod").canary_enabled is False


def test_prod_runs_the_canary_as_shipped(deployable_config: Path) -> None:
    settings = load_settings(deployable_config, "prod")
    assert settings.canary_enabled is True
    assert settings.environment.canary.ttfa_p95_ms == 400


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "memory_mib = 2048",
            "memory_mib = 1024",
            "probe.memory_mib = 1024: Fargate does not offer this memory with 1024 CPU units. Fix: use 2048 to 8192",
        ),
        (
            "cpu = 1024                         # with",
            "cpu = 300  #",
            "probe.cpu = 300: not a Fargate CPU size",
        ),
        (
            "streams_per_task = 32",
            "streams_per_task = 0",
            "probe.streams_per_task = 0: Input should be greater",
        ),
        (
            "max_tasks = 20",
            "max_tasks = 101",
            "probe.max_tasks = 101: Input should be less than or equal to 100",
        ),
    ],
)
def test_the_probe_task_is_a_size_fargate_runs(
    edit_config: EditConfig, old: str, new: str, expected: str
) -> None:
    message = error_for(edit_config(DEV, old, new))
    assert message.startswith(expected), message
    assert "Fix: " in message


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("every_minutes = 5", "every_minutes = 0", "canary.every_minutes = 0: Input should be greater"),
        ("requests = 3", "requests = 0", "canary.requests = 0: Input should be greater"),
        (
            "ttfa_p95_ms = 500 ",
            "ttfa_p95_ms = -1 ",
            "canary.ttfa_p95_ms = -1: Input should be greater than 0",
        ),
        ('transcript = "Thanks', 'transcript = "${AWS::Region} Thanks', "canary.transcript = "),
        ("# enabled = true", 'voice_id = "a voice"', "canary.voice_id = 'a voice': "),
    ],
)
def test_canary_values_are_checked(edit_config: EditConfig, old: str, new: str, expected: str) -> None:
    message = error_for(edit_config(DEV, old, new))
    assert message.startswith(expected), message


def test_the_probe_task_reaches_no_turn_hop_unless_listed(
    dev_settings: Settings, edit_config: EditConfig
) -> None:
    assert dev_settings.environment.probe.turn_hops == []
    line = '# turn_hops = ["transcribe", "bedrock"]'
    config = edit_config(DEV, line, line.removeprefix("# "))
    assert load_settings(config, "dev").environment.probe.turn_hops == ["transcribe", "bedrock"]


@pytest.mark.parametrize(
    ("hops", "expected"),
    [
        ('["openai"]', "probe.turn_hops[0] = 'openai': Input should be 'transcribe' or 'bedrock'"),
        ('["bedrock", "bedrock"]', "probe.turn_hops = ['bedrock', 'bedrock']: names a hop twice"),
        ('"bedrock"', "probe.turn_hops = 'bedrock': Input should be a valid list"),
    ],
)
def test_turn_hops_are_the_two_cloud_hops_each_once(
    edit_config: EditConfig, hops: str, expected: str
) -> None:
    message = error_for(edit_config(DEV, '# turn_hops = ["transcribe", "bedrock"]', f"turn_hops = {hops}"))
    assert message.startswith(expected), message
