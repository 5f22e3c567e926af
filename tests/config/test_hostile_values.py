"""Values TOML can hold and AWS would refuse, caught at load time with one line naming the field: a boolean
where a number goes, infinity and NaN, a Region or model-package ARN with a trailing newline; and the
wording of what is refused (a field's own range first, a bad key named as a key, a list item as [index], a
byte-order mark)."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest
from pydantic import ValidationError

from sonic_deploy.config import ConfigError, load_settings
from sonic_deploy.config.base import Strict
from sonic_deploy.config.explain import toml_path
from tests.conftest import EditConfig

DEV = "environments/dev.toml"
ROUTES = 'routes = ["sagemaker", "ecs"]'
LATENCY = "model_latency_p95_ms = 500"


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


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        # The field's own range, not CloudFormation's integers: a share is at most 1.
        ("target_utilisation = 0.8", "target_utilisation = 1e308", "sagemaker.target_utilisation = 1e+308: "),
        ("min_instances = 2", "min_instances = 99999999999", "sagemaker.min_instances = 99999999999: "),
    ],
)
def test_a_huge_number_gets_the_fields_own_range(
    edit_config: EditConfig, old: str, new: str, expected: str
) -> None:
    message = error_for(edit_config(DEV, old, new))
    assert message.startswith(expected) and ": Input should be less than or equal to " in message, message
    assert "2147483647" not in message


def test_a_huge_number_in_a_field_without_a_range() -> None:
    """The int32 backstop still catches a field with no range of its own, worded for what it holds."""

    class Unbounded(Strict):
        whole: int = 0
        share: float = 0.0

    with pytest.raises(ValidationError) as caught:
        Unbounded.model_validate({"whole": 2**31})
    assert "CloudFormation's integers stop at 2147483647" in str(caught.value)
    with pytest.raises(ValidationError) as caught:
        Unbounded.model_validate({"share": 1e308})
    assert "none goes past 2147483647" in str(caught.value) and "integers" not in str(caught.value)


@pytest.mark.parametrize(
    ("key", "shown", "problem"),
    [
        ("a\\u0007b", "a\\x07b", "the key holds the control character '\\x07'"),
        ("x${AWS::Region}", "x${AWS::Region}", "the key holds '${AWS::', which CloudFormation"),
    ],
)
def test_a_bad_tag_key_is_named_as_the_key(
    edit_config: EditConfig, key: str, shown: str, problem: str
) -> None:
    config = edit_config(DEV, 'project = "sonic-deploy"', f'"{key}" = "y"')
    message = error_for(config)
    assert message.startswith(f"tags.\"{shown}\" = '{shown}': {problem}"), message
    assert "Fix: rename the key in tags: " in message and "value" not in message.split("Fix: ")[1], message


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            ROUTES,
            'routes = ["sagemaker", "bogus"]',
            "routes[1] = 'bogus': Input should be 'sagemaker', 'ecs' or 'eks'. ",
        ),
        (
            LATENCY,
            f'{LATENCY}\nemail = ["a\\u0007@b.c"]',
            "sagemaker.alarms.email[0] = 'a\\x07@b.c': holds the ",
        ),
    ],
)
def test_a_list_item_is_named_by_its_index_in_brackets(
    edit_config: EditConfig, old: str, new: str, expected: str
) -> None:
    message = error_for(edit_config(DEV, old, new))
    assert message.startswith(expected), message
    assert ".1 " not in message and ".0 " not in message


def test_toml_path_brackets_indices_and_quotes_names() -> None:
    assert toml_path(["ecs", "services", "nats", "command", 2]) == "ecs.services.nats.command[2]"
    assert toml_path(["tags", "1"]) == "tags.1"  # a key that is digits is a key, not an index
    assert toml_path(["concurrency", "sonic-3", "alternatives", 0, "streams"]) == (
        'concurrency."sonic-3".alternatives[0].streams'
    )


def test_a_byte_order_mark_says_save_without_it(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "", "")
    (config / DEV).write_bytes(codecs.BOM_UTF8 + (config / DEV).read_bytes())
    message = error_for(config)
    assert message.startswith("(encoding) = b'\\xef\\xbb\\xbf': starts with a UTF-8 byte-order mark (BOM)"), (
        message
    )
    assert "Fix: save the file as UTF-8 without a BOM" in message
