"""Values TOML can hold and AWS would refuse, caught at load time with one line naming the field: a boolean
where a number goes, infinity and NaN, a Region or model-package ARN with a trailing newline."""

from __future__ import annotations

from pathlib import Path

import pytest

from sonic_deploy.config import ConfigError, load_settings
from tests.conftest import EditConfig

DEV = "environments/dev.toml"


def error_for(config_dir: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(config_dir, "dev")
    message = str(caught.value)
    assert "\n" not in message
    return message.split(": ", 1)[1]  # without the (temporary) file path


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("min_instances = 2", "min_instances = true", "sagemaker.min_instances"),
        ("min_workers = 2", "min_workers = false", "ecs.min_workers"),
        ("log_retention_days = 30", "log_retention_days = true", "log_retention_days"),
    ],
)
def test_a_boolean_is_not_a_number(edit_config: EditConfig, old: str, new: str, field: str) -> None:
    value = new.split(" = ")[1].title()
    assert error_for(edit_config(DEV, old, new)).startswith(
        f"{field} = {value}: a boolean where a number is needed (true and false are not 1 and 0). Fix: "
    )


@pytest.mark.parametrize("literal", ["inf", "-inf", "nan", "+inf"])
def test_numbers_are_finite(edit_config: EditConfig, literal: str) -> None:
    config = edit_config(DEV, "model_latency_p95_ms = 500", f"model_latency_p95_ms = {literal}")
    assert "sagemaker.alarms.model_latency_p95_ms = " in error_for(config)
    assert ": Input should be a finite number. Fix: " in error_for(config)


def test_a_boolean_where_a_boolean_goes_is_still_one(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "copy_images = true", "copy_images = false")
    ecs = load_settings(config, "dev").environment.ecs
    assert ecs is not None and ecs.copy_images is False


def test_a_region_with_a_trailing_newline(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'region = "us-east-2"', 'region = "us-east-2\\n"')
    assert error_for(config).startswith("region = 'us-east-2\\n': ")


def test_a_model_package_arn_with_a_trailing_newline(edit_config: EditConfig) -> None:
    text = (edit_config(DEV, "", "") / "model_packages.toml").read_text()
    arn_start = text.index('"arn:aws:sagemaker:')
    arn_end = text.index('"', arn_start + 1)
    arn = text[arn_start + 1 : arn_end]
    config = edit_config("model_packages.toml", f'"{arn}"', f'"{arn}\\n"')
    with pytest.raises(ConfigError) as caught:
        load_settings(config, "dev")
    assert "\n" not in str(caught.value)
    assert "model_packages.toml" in str(caught.value) and "\\n" in str(caught.value)
