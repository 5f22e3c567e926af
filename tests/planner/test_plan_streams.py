"""Where streams per instance come from: a probe, the environment's override, or the catalogue."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sonic_deploy.config import ConfigError, load_settings
from sonic_deploy.planner.capacity import StreamsPerInstance
from sonic_deploy.planner.plan import streams_per_instance
from sonic_deploy.planner.probe_summary import MeasuredConcurrency
from tests.cdk_context import ROOT

SETTINGS = load_settings(ROOT / "config", "dev")


def test_catalogue_figures() -> None:
    assert streams_per_instance(SETTINGS, "g6.4xlarge", None).count == 4  # one L4 at 4
    assert streams_per_instance(SETTINGS, "ml.g6e.xlarge", None).source.startswith(
        "catalogue: sonic-3, per ml.g6e.xlarge: Cartesia's Sonic 3 SageMaker listing README"
    )
    assert streams_per_instance(SETTINGS, "g6e.xlarge", None).source.startswith(
        "catalogue: sonic-3, 1 x L40S at 8"
    )


def test_environment_override_applies_to_its_sagemaker_type_only() -> None:
    sagemaker = SETTINGS.environment.sagemaker.model_copy(update={"streams_per_instance": 4})
    settings = dataclasses.replace(
        SETTINGS, environment=SETTINGS.environment.model_copy(update={"sagemaker": sagemaker})
    )
    assert streams_per_instance(settings, "ml.g6e.xlarge", None) == StreamsPerInstance(
        4, "environment dev: sagemaker.streams_per_instance"
    )
    assert streams_per_instance(settings, "g6e.xlarge", None).count == 8


def test_probe_wins_for_the_probed_type() -> None:
    measured = ("g6e.xlarge", MeasuredConcurrency(12, 210.0, 250.0, Path("out/summary.json")))
    assert streams_per_instance(SETTINGS, "g6e.xlarge", measured) == StreamsPerInstance(
        12, "probe: summary.json, TTFA p95 210 ms <= 250 ms"
    )
    assert streams_per_instance(SETTINGS, "ml.g6e.xlarge", measured).count == 8


def test_unknown_type_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        streams_per_instance(SETTINGS, "p5.48xlarge", None)
    assert str(caught.value).startswith(
        "command line: --instance-types = 'p5.48xlarge': not in config/instance_types.toml. Fix: use some of "
    )
