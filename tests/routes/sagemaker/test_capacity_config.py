"""`[sagemaker.capacity]` at load: instance pools, the provisioning timeout, a reservation; what the config
refuses, each with the field and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from sonic_deploy.config import ConfigError, Settings, load_settings
from sonic_deploy.config.loader import InstancePool
from tests.conftest import EditConfig

DEV = "environments/dev.toml"
CATALOGUE = "instance_types.toml"
PLAN = "arn:aws:sagemaker:us-east-2:123456789012:training-plan/sonic-endpoints"
SHIPPED_TYPES = 'instance_types = ["ml.g6e.xlarge"]\nsource = "Cartesia docs'


def pooled(edit_config: EditConfig, capacity: str) -> Path:
    """dev with a `[sagemaker.capacity]` table, and a sonic-3 package that serves three types."""
    edit_config(CATALOGUE, SHIPPED_TYPES, SHIPPED_TYPES.replace('"]', '", "ml.g6e.2xlarge", "ml.g6.xlarge"]'))
    return edit_config(DEV, "", "\n[sagemaker.capacity]\n" + capacity)


def error_for(config_dir: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(config_dir, "dev")
    return str(caught.value).split(": ", 1)[1]  # without the (temporary) file path


def test_pools_by_priority_with_what_each_type_serves(edit_config: EditConfig) -> None:
    config = pooled(
        edit_config, 'fallback_types = ["ml.g6e.2xlarge", "ml.g6.xlarge"]\nprovision_timeout_s = 900\n'
    )
    settings = load_settings(config, "dev")
    assert settings.sagemaker_pools == (
        InstancePool("ml.g6e.xlarge", 8, 1),  # sonic-3's per-instance figure
        InstancePool("ml.g6e.2xlarge", 8, 1),  # 1 x L40S at 8
        InstancePool("ml.g6.xlarge", 4, 1),  # 1 x L4 at 4
    )
    assert settings.environment.sagemaker.capacity.provision_timeout_s == 900


def test_the_shipped_config_has_one_type(dev_settings: Settings) -> None:
    assert dev_settings.sagemaker_pools == (InstancePool("ml.g6e.xlarge", 8, 1),)


def test_a_type_the_model_package_does_not_serve(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "", '\n[sagemaker.capacity]\nfallback_types = ["ml.g6.xlarge"]\n')
    assert error_for(config) == (
        "sagemaker.capacity.fallback_types[0] = 'ml.g6.xlarge': not a type the sonic-3 model package serves "
        '(Cartesia docs, Cloud service provisioning: "Sonic 3 supports only real time inference on Sagemaker. '
        "Please select ml.g6e.xlarge\"). Fix: use ml.g6e.xlarge; or, once the package's own list has it "
        '(`sonic-deploy preflight`), add it to [model_package."sonic-3"] in config/instance_types.toml'
    )


@pytest.mark.parametrize(
    ("capacity", "expected"),
    [
        (
            'fallback_types = ["ml.g6.xlarge", "ml.g6.xlarge"]',
            "sagemaker.capacity.fallback_types = ['ml.g6.xlarge', 'ml.g6.xlarge']: names ml.g6.xlarge twice",
        ),
        (
            'fallback_types = ["ml.g5.xlarge"]',
            "sagemaker.capacity.fallback_types[0] = 'ml.g5.xlarge': not a type the sonic-3 model package serves",
        ),
        (
            'fallback_types = ["g6.xlarge"]',
            "sagemaker.capacity.fallback_types[0] = 'g6.xlarge': not a GPU SageMaker (ml.) instance type",
        ),
        (
            f'fallback_types = ["ml.g6.xlarge"]\nml_reservation_arn = "{PLAN}"',
            f"sagemaker.capacity.ml_reservation_arn = '{PLAN}': a reservation with fallback_types",
        ),
        (
            "provision_timeout_s = 60",
            "sagemaker.capacity.provision_timeout_s = 60: Input should be greater than or",
        ),
        (
            # Five fallbacks: six types in all, past SageMaker's five (and the catalogue has only five).
            'fallback_types = ["ml.g6e.2xlarge", "ml.g6.xlarge", "ml.g6.2xlarge", "ml.g5.xlarge", "ml.g6e.xlarge"]',
            "sagemaker.capacity.fallback_types = ['ml.g6e.2xlarge', 'ml.g6.xlarge', 'ml.g6.2xlarge', 'ml.g5.xlarge', "
            "'ml.g6e.xlarge']: List should have at most 4 items",
        ),
    ],
)
def test_refused(edit_config: EditConfig, capacity: str, expected: str) -> None:
    assert error_for(pooled(edit_config, capacity + "\n")).startswith(expected)


def test_a_type_with_other_storage_needs_another_volume_key(edit_config: EditConfig) -> None:
    edit_config(
        CATALOGUE,
        '[instance_types."ml.g6.xlarge"]\nlocal_storage = true',
        '[instance_types."ml.g6.xlarge"]\nlocal_storage = false',
    )
    message = error_for(pooled(edit_config, 'fallback_types = ["ml.g6.xlarge"]\n'))
    assert message.startswith(
        "sagemaker.capacity.fallback_types = ['ml.g6.xlarge']: mixes types with local NVMe"
    )


@pytest.mark.parametrize(
    ("arn", "expected"),
    [
        ("arn:aws:sagemaker:us-east-2:123456789012:model-package/x", "not a training plan's ARN"),
        (PLAN.replace("us-east-2", "us-west-2"), "a plan of us-west-2: the endpoint is in us-east-2"),
    ],
)
def test_a_reservation_of_this_environment_only(edit_config: EditConfig, arn: str, expected: str) -> None:
    config = edit_config(DEV, "", f'\n[sagemaker.capacity]\nml_reservation_arn = "{arn}"\n')
    assert f"sagemaker.capacity.ml_reservation_arn = '{arn}': {expected}" in error_for(config)


def test_a_reservation_alone_loads(edit_config: EditConfig) -> None:
    config = edit_config(DEV, "", f'\n[sagemaker.capacity]\nml_reservation_arn = "{PLAN}"\n')
    assert load_settings(config, "dev").environment.sagemaker.capacity.ml_reservation_arn == PLAN


def test_a_package_type_the_catalogue_does_not_describe(edit_config: EditConfig) -> None:
    config = edit_config(CATALOGUE, SHIPPED_TYPES, SHIPPED_TYPES.replace('"]', '", "ml.g9.xlarge"]'))
    assert error_for(config) == (
        "model_package.\"sonic-3\".instance_types = 'ml.g9.xlarge': not a SageMaker (ml.) type described under "
        '[instance_types]. Fix: add an [instance_types."ml.g9.xlarge"] table, or correct the name'
    )
