"""Concurrency in config/instance_types.toml: keyed by Sonic version, every figure with its source, the
contradicting figures kept beside it, and each bad edit refused with the field and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from sonic_deploy.config import ConfigError, load_settings
from sonic_deploy.config.catalogue import PublishedFigure
from tests.conftest import CONFIG_DIR, EditConfig

CATALOGUE = "instance_types.toml"
DEV = "environments/dev.toml"
README_429 = 'the same README\'s 429 section: "at most 4 concurrent generation requests"'


def error_for(config_dir: Path, env: str = "dev") -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(config_dir, env)
    return str(caught.value).split(": ", 1)[1]  # without the (temporary) file path


def on_version(edit_config: EditConfig, version: str) -> Path:
    """dev on another Sonic version, with a (made-up) model package so the SageMaker route loads."""
    if version == "sonic-3":  # the shipped one
        return edit_config(DEV, "", "")
    edit_config(DEV, 'sonic_version = "sonic-3"', f'sonic_version = "{version}"')
    name = version.replace(".", "").capitalize()
    return edit_config(
        "model_packages.toml",
        "",
        f'\n[versions."{version}"]\nus-east-2 = "arn:aws:sagemaker:us-east-2:123456789012:model-package/{name}"\n',
    )


def test_shipped_catalogue_has_the_three_versions() -> None:
    catalogue = load_settings(CONFIG_DIR, "dev").catalogue
    assert sorted(catalogue.concurrency) == ["sonic-3", "sonic-3.5", "sonic-3.6"]


@pytest.mark.parametrize(("version", "streams"), [("sonic-3", 8), ("sonic-3.5", 10), ("sonic-3.6", 10)])
def test_sagemaker_figure_per_version(edit_config: EditConfig, version: str, streams: int) -> None:
    settings = load_settings(on_version(edit_config, version), "dev")
    published = settings.catalogue_streams("ml.g6e.xlarge")
    assert published.streams == streams
    assert published.source.startswith(
        f"{version}, per ml.g6e.xlarge: Cartesia's Sonic {version[6:]} SageMaker"
    )
    # Cartesia's README contradicts itself in its 429 section, whatever the version.
    assert published.alternatives == (PublishedFigure(streams=4, source=README_429),)
    # What the SageMaker scaling targets (nothing configured in dev).
    assert settings.sagemaker_streams_per_instance == streams


@pytest.mark.parametrize("version", ["sonic-3", "sonic-3.5", "sonic-3.6"])
def test_ecs_types_use_the_per_gpu_figure_with_the_older_page_beside_it(
    edit_config: EditConfig, version: str
) -> None:
    settings = load_settings(on_version(edit_config, version), "dev")
    l40s = settings.catalogue_streams("g6e.xlarge")
    assert l40s.streams == 8
    assert l40s.source == (
        f"{version}, 1 x L40S at 8 per GPU: Cartesia self-hosted docs, newest page (Sonic version not stated): "
        "L40S 8 concurrent"
    )
    assert l40s.alternatives == (
        PublishedFigure(
            streams=4,
            source="1 x L40S at 4 per GPU: Cartesia self-hosted docs, older page: L40S 4 concurrent",
        ),
    )
    assert settings.catalogue_streams("g6.xlarge").alternatives == ()  # L4: one (assumed) figure
    # A listing's per-instance figure covers its own type only: the 2xlarge falls back to the GPU's.
    assert settings.catalogue_streams("ml.g6e.2xlarge").streams == 8


def test_configured_streams_win_for_scaling(edit_config: EditConfig) -> None:
    config = on_version(edit_config, "sonic-3.6")
    config = edit_config(
        DEV, "target_utilisation = 0.8\n", "target_utilisation = 0.8\nstreams_per_instance = 5\n"
    )
    assert load_settings(config, "dev").sagemaker_streams_per_instance == 5


def test_unknown_sonic_version_lists_the_known_ones(edit_config: EditConfig) -> None:
    config = edit_config(DEV, 'sonic_version = "sonic-3"', 'sonic_version = "sonic-3.7"')
    assert error_for(config) == (
        "sonic_version = 'sonic-3.7': unknown Sonic version (config/instance_types.toml has no concurrency "
        "figures for it). Fix: use one of sonic-3, sonic-3.5, sonic-3.6, or add "
        '[concurrency."sonic-3.7".per_gpu.<GPU>] tables to config/instance_types.toml'
    )


def test_unknown_sonic_version_on_the_ecs_route_alone(edit_config: EditConfig) -> None:
    """No model package is looked up without SageMaker: the catalogue still refuses the version."""
    edit_config(DEV, 'routes = ["sagemaker", "ecs"]', 'routes = ["ecs"]')
    config = edit_config(DEV, 'sonic_version = "sonic-3"', 'sonic_version = "sonic3"')
    assert error_for(config).startswith(
        "sonic_version = 'sonic3': unknown Sonic version (config/instance_types.toml has no concurrency figures "
        "for it). Fix: use one of sonic-3, sonic-3.5, sonic-3.6"
    )


def test_ecs_alone_needs_no_model_package_for_a_new_version(edit_config: EditConfig) -> None:
    edit_config(DEV, 'routes = ["sagemaker", "ecs"]', 'routes = ["ecs"]')
    config = edit_config(DEV, 'sonic_version = "sonic-3"', 'sonic_version = "sonic-3.6"')
    assert load_settings(config, "dev").catalogue_streams("g6e.xlarge").source.startswith("sonic-3.6, ")


def test_a_version_missing_a_gpu_an_instance_type_uses(edit_config: EditConfig) -> None:
    config = edit_config(
        CATALOGUE, '[concurrency."sonic-3.5".per_gpu.L4]', '[concurrency."sonic-3.5".per_gpu.T4]'
    )
    config = edit_config(CATALOGUE, "[gpus.L4]", "[gpus.T4]\nmemory_gib = 16\n\n[gpus.L4]")
    assert error_for(config) == (
        'concurrency."sonic-3.5".per_gpu.L4 = (missing): no concurrency figure for L4 (used by ml.g6.xlarge) '
        'under sonic-3.5. Fix: add a [concurrency."sonic-3.5".per_gpu.L4] table with streams and source'
    )


def test_a_figure_for_an_undescribed_gpu(edit_config: EditConfig) -> None:
    config = edit_config(
        CATALOGUE, '[concurrency."sonic-3".per_gpu.H100]', '[concurrency."sonic-3".per_gpu.H200]'
    )
    assert error_for(config) == (
        "concurrency.\"sonic-3\".per_gpu.H200 = 'H200': GPU model not described under [gpus]. "
        "Fix: add a [gpus.H200] table or use one of L40S, L4, A10G, H100, RTXPRO6000"
    )


def test_a_figure_for_an_undescribed_instance_type(edit_config: EditConfig) -> None:
    config = edit_config(
        CATALOGUE,
        '[concurrency."sonic-3.6".per_instance."ml.g6e.xlarge"]',
        '[concurrency."sonic-3.6".per_instance."ml.g6e.xlarg"]',
    )
    assert error_for(config) == (
        'concurrency."sonic-3.6".per_instance."ml.g6e.xlarg" = \'ml.g6e.xlarg\': instance type not described '
        'under [instance_types]. Fix: add an [instance_types."ml.g6e.xlarg"] table, or correct the name'
    )


def test_a_figure_without_its_source(edit_config: EditConfig) -> None:
    config = edit_config(
        CATALOGUE,
        "streams = 10\nsource = \"Cartesia's Sonic 3.5 SageMaker listing README (cartesia-ai/cartesia-aws): 10 "
        'concurrent requests per ml.g6e.xlarge"\n',
        "streams = 10\n",
    )
    assert error_for(config) == (
        'concurrency."sonic-3.5".per_instance."ml.g6e.xlarge".source = (missing): required key is missing. '
        "Fix: add `source = ...` to instance_types.toml"
    )


def test_a_misspelt_key_in_an_alternative(edit_config: EditConfig) -> None:
    config = edit_config(
        CATALOGUE, "alternatives = [{ streams = 4, source", "alternatives = [{ streams = 4, sorce"
    )
    assert error_for(config) == (
        f'concurrency."sonic-3".per_instance."ml.g6e.xlarge".alternatives[0].sorce = {README_429!r}: unknown key. '
        "Fix: did you mean 'source'? remove or rename it; known keys here: source, streams"
    )


def test_a_zero_figure(edit_config: EditConfig) -> None:
    config = edit_config(CATALOGUE, "streams = 16", "streams = 0")
    assert error_for(config) == (
        'concurrency."sonic-3".per_gpu.H100.streams = 0: Input should be greater than or equal to 1. Fix: write '
        'a number in that range for concurrency."sonic-3".per_gpu.H100.streams (required; concurrent Sonic '
        "streams)"
    )
