"""[ecs.resilience]: off as shipped, and the FIS fault's duration and share held to what a rehearsal needs."""

from __future__ import annotations

import pytest

from sonic_deploy.config import ConfigError, Settings, load_settings
from tests.config.test_ecs_config import DEV, error_for
from tests.conftest import EditConfig


def test_off_as_shipped(dev_settings: Settings) -> None:
    assert dev_settings.environment.ecs is not None
    assert dev_settings.environment.ecs.resilience.enabled is False


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("insufficient_capacity_minutes = 0", "Input should be greater than or equal to 1"),
        ("insufficient_capacity_minutes = 61", "Input should be less than or equal to 60"),
        ("insufficient_capacity_percent = 0", "Input should be greater than or equal to 1"),
        ("insufficient_capacity_percent = 101", "Input should be less than or equal to 100"),
    ],
)
def test_bounds(edit_config: EditConfig, line: str, problem: str) -> None:
    field, value = line.split(" = ")
    shipped = {"insufficient_capacity_minutes": "10", "insufficient_capacity_percent": "100"}[field]
    config = edit_config(DEV, f"{field} = {shipped}", line)
    message = error_for(config)
    assert message.startswith(f"ecs.resilience.{field} = {value}: {problem}. Fix: ")


def test_unknown_key_is_refused(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "enabled = false", "enable = true")
    with pytest.raises(
        ConfigError, match=r"ecs\.resilience\.enable = True: unknown key\. Fix: did you mean 'enabled'\?"
    ):
        load_settings(config, "dev")
