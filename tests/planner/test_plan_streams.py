"""Where streams per instance come from: a probe, the environment's override, or the catalogue for the
environment's Sonic version; whichever wins carries the figures it replaced and the contradicting ones."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sonic_deploy.config import ConfigError, Settings, load_settings
from sonic_deploy.config.catalogue import PublishedFigure
from sonic_deploy.planner.capacity import Figure, StreamsPerInstance
from sonic_deploy.planner.plan import streams_notes, streams_per_instance
from sonic_deploy.planner.probe_summary import MeasuredConcurrency
from tests.cdk_context import ROOT

SETTINGS = load_settings(ROOT / "config", "dev")
LISTING = (
    "sonic-3, per ml.g6e.xlarge: Cartesia's Sonic 3 SageMaker listing README (cartesia-ai/cartesia-aws): 8 "
    "concurrent requests per ml.g6e.xlarge"
)
README_429 = PublishedFigure(
    streams=4, source='the same README\'s 429 section: "at most 4 concurrent generation requests"'
)
CONFIGURED = "environment dev: sagemaker.streams_per_instance"
PROBE = MeasuredConcurrency(6, 180.0, 250.0, Path("out/summary.json"))
MEASURED = "probe: summary.json, TTFA p95 180 ms <= 250 ms"


def configured(streams: int) -> Settings:
    sagemaker = SETTINGS.environment.sagemaker.model_copy(update={"streams_per_instance": streams})
    return dataclasses.replace(
        SETTINGS, environment=SETTINGS.environment.model_copy(update={"sagemaker": sagemaker})
    )


def on_version(version: str) -> Settings:
    return dataclasses.replace(
        SETTINGS, environment=SETTINGS.environment.model_copy(update={"sonic_version": version})
    )


def test_catalogue_figure_with_the_figure_that_contradicts_it() -> None:
    assert streams_per_instance(SETTINGS, "ml.g6e.xlarge", None) == StreamsPerInstance(
        8, LISTING, basis="catalogue", contradicted_by=(README_429,)
    )
    l40s = streams_per_instance(SETTINGS, "g6e.xlarge", None)
    assert l40s.source.startswith("sonic-3, 1 x L40S at 8 per GPU: Cartesia self-hosted docs, newest page")
    assert [(alt.streams, alt.source) for alt in l40s.contradicted_by] == [
        (4, "1 x L40S at 4 per GPU: Cartesia self-hosted docs, older page: L40S 4 concurrent")
    ]
    assert streams_per_instance(SETTINGS, "g6.4xlarge", None).count == 4  # one L4 at 4, assumed
    assert streams_per_instance(SETTINGS, "g6.4xlarge", None).contradicted_by == ()


@pytest.mark.parametrize(("version", "streams"), [("sonic-3", 8), ("sonic-3.5", 10), ("sonic-3.6", 10)])
def test_catalogue_figure_follows_the_environment_s_sonic_version(version: str, streams: int) -> None:
    figure = streams_per_instance(on_version(version), "ml.g6e.xlarge", None)
    assert (figure.count, figure.basis, figure.contradicted_by) == (streams, "catalogue", (README_429,))
    assert figure.source.startswith(f"{version}, per ml.g6e.xlarge: Cartesia's Sonic {version[6:]} SageMaker")
    # The self-hosted per-GPU figure does not change with the version.
    assert streams_per_instance(on_version(version), "g6e.xlarge", None).count == 8


def test_environment_override_applies_to_its_sagemaker_type_only() -> None:
    settings = configured(4)
    assert streams_per_instance(settings, "ml.g6e.xlarge", None) == StreamsPerInstance(
        4,
        CONFIGURED,
        basis="configured",
        replaces=(Figure("catalogue", 8, LISTING),),
        contradicted_by=(README_429,),
    )
    assert streams_per_instance(settings, "g6e.xlarge", None).basis == "catalogue"


def test_probe_replaces_the_catalogue_for_the_probed_type() -> None:
    measured = ("ml.g6e.xlarge", PROBE)
    assert streams_per_instance(SETTINGS, "ml.g6e.xlarge", measured) == StreamsPerInstance(
        6,
        MEASURED,
        basis="measured",
        replaces=(Figure("catalogue", 8, LISTING),),
        contradicted_by=(README_429,),
    )
    assert streams_per_instance(SETTINGS, "g6e.xlarge", measured).count == 8


def test_probe_replaces_the_configured_figure_too() -> None:
    figure = streams_per_instance(configured(4), "ml.g6e.xlarge", ("ml.g6e.xlarge", PROBE))
    assert (figure.count, figure.basis) == (6, "measured")
    assert figure.replaces == (Figure("configured", 4, CONFIGURED), Figure("catalogue", 8, LISTING))


def test_notes_say_how_to_measure_and_whether_scaling_follows() -> None:
    types = ("ml.g6e.xlarge", "g6e.xlarge", "g6.xlarge")
    published = streams_notes(SETTINGS, {t: streams_per_instance(SETTINGS, t, None) for t in types})
    assert len(published) == 1
    assert published[0].startswith(
        "Streams per instance for ml.g6e.xlarge, g6e.xlarge, g6.xlarge are published figures, not measurements "
        "(published figures disagree for ml.g6e.xlarge, g6e.xlarge). To replace one with a measurement: probe "
        "ONE instance of the type (`sonic-deploy probe sagemaker"
    )
    assert published[0].endswith(
        "then `sonic-deploy plan --probe OUT/summary.json --probe-instance-type TYPE`: the measured figure "
        "replaces the catalogue's for that type."
    )
    measured = ("ml.g6e.xlarge", PROBE)
    notes = streams_notes(
        SETTINGS, {"ml.g6e.xlarge": streams_per_instance(SETTINGS, "ml.g6e.xlarge", measured)}
    )
    assert notes == [
        "The SageMaker scaling of environment dev still targets 8 streams per ml.g6e.xlarge, not the measured 6: "
        "set `streams_per_instance = 6` under [sagemaker] in config/environments/dev.toml to deploy with it."
    ]
    # Once configured to the measured figure, there is nothing left to say.
    settings = configured(6)
    assert (
        streams_notes(settings, {"ml.g6e.xlarge": streams_per_instance(settings, "ml.g6e.xlarge", measured)})
        == []
    )


def test_unknown_type_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        streams_per_instance(SETTINGS, "p5.48xlarge", None)
    assert str(caught.value).startswith(
        "command line: --instance-types = 'p5.48xlarge': not in config/instance_types.toml. Fix: use some of "
    )
