"""Property: whatever a user writes into the shipped config files (tests/fuzz/config.py walks the schema, so a
field added later is mutated too), loading ends in one clean ConfigError line that names the field and the
fix, or in valid settings, and never in any other exception. A sample of the valid ones is built into stacks
(add_stacks, no synth), so a value the loader passes but a construct refuses shows up here too: the valid
cases whose hash falls in one bucket of CONSTRUCT_BUCKETS, wherever they come in the run (not the first
few, which the derandomized run makes the same simple cases every time), at most CONSTRUCTED_AT_MOST."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from aws_cdk import App
from hypothesis import given, settings

from sonic_deploy.config import ConfigError, Settings, load_settings
from sonic_deploy.stacks import add_stacks
from tests.cdk_context import cli_context
from tests.fuzz import config as fuzz
from tests.fuzz import examples

CONSTRUCTED_AT_MOST = 4  # each add_stacks takes about a second
# About 1 in 25 of the 200 examples loads (8 today); 1 in 3 of those is built: a few, spread over the run.
CONSTRUCT_BUCKETS = 3
_constructed: list[str] = []


def in_the_sample(mutation: fuzz.Mutation) -> bool:
    """A stable choice (sha256, not hash(): the same cases on every run) that does not depend on when the
    case comes."""
    key = f"{mutation.file}|{mutation.kind}|{mutation.path!r}|{mutation.value!r}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big") % CONSTRUCT_BUCKETS == 0


def to_construct(valid: Iterable[fuzz.Mutation]) -> list[fuzz.Mutation]:
    """Of the valid cases in the order they come, the ones built into stacks."""
    return [m for m in valid if m.kind != "delete" and in_the_sample(m)][:CONSTRUCTED_AT_MOST]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    copy = tmp_path_factory.mktemp("fuzz") / "config"
    shutil.copytree(fuzz.CONFIG_DIR, copy)
    yield copy


def check_clean(error: ConfigError) -> None:
    message = str(error)
    assert message.isprintable(), f"not one printable line: {message!r}"
    assert error.field.strip() and error.fix.strip(), message
    assert "known keys here: " not in message or not message.endswith("known keys here: "), message
    assert "that satisfies this" not in error.fix, f"a fix that says nothing: {message}"


@settings(max_examples=examples(200))
@given(mutation=fuzz.mutations())
def test_any_edit_loads_or_fails_in_one_clean_line(scratch: Path, mutation: fuzz.Mutation) -> None:
    fuzz.apply(mutation, scratch)
    try:
        loaded = load_settings(scratch, "prod" if mutation.file.endswith("prod.toml") else "dev")
    except ConfigError as error:
        check_clean(error)
    else:
        check_tags_cloudformation_takes(loaded)
        construct(loaded, mutation)
    finally:
        shutil.copyfile(fuzz.CONFIG_DIR / mutation.file, scratch / mutation.file)


def check_tags_cloudformation_takes(loaded: Settings) -> None:
    """Every resource carries the tags, and CloudFormation's AWS::CloudWatch::Alarm Tag is the strictest the
    stacks hold (value 1 to 256 characters): add_stacks builds a template with any value, only the synth's
    validation (not run here) would refuse it."""
    for key, value in loaded.environment.tags.items():
        assert 1 <= len(key) <= 128 and 1 <= len(value) <= 256, (key, value)


def construct(loaded: Settings, mutation: fuzz.Mutation) -> None:
    if len(_constructed) >= CONSTRUCTED_AT_MOST or mutation.kind == "delete" or not in_the_sample(mutation):
        return
    _constructed.append(mutation.describe())
    add_stacks(App(context=cli_context()), loaded)  # raises (a jsii error) if a construct refuses a value


def test_the_stacks_are_built_for_a_spread_of_valid_cases_not_the_first_few() -> None:
    """A construct that refuses only the 10th valid case must be reachable: the sample is spread over the
    run and bounded."""
    valid = [
        fuzz.Mutation("environments/dev.toml", ("sagemaker", "min_instances"), "set", n) for n in range(60)
    ]
    chosen = to_construct(valid)
    assert 1 <= len(chosen) <= CONSTRUCTED_AT_MOST
    assert any(valid.index(m) >= 2 for m in chosen), [m.value for m in chosen]
    assert chosen == to_construct(valid)  # the same cases on every run


def test_the_generators_reach_fields_absent_from_the_files() -> None:
    """The walk is over the schema, not the files: a field no shipped file sets is mutated too."""
    paths = fuzz.PATHS["environments/dev.toml"]
    assert ("network", "existing_vpc", "vpc_cidr") in paths
    assert ("ecs", "services", "api_server", "digest") in paths
    assert ("sagemaker", "streams_per_instance") in paths


def test_the_writer_round_trips() -> None:
    import tomllib

    for file in fuzz.FILES:
        data = fuzz.shipped(file)
        assert tomllib.loads(fuzz.dumps(data)) == data
