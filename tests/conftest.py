"""Synthesize each environment's stacks once per test session, with the CLI's context."""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import shutil
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import App, CloudFormationValidatePlugin, Stack, Validations
from aws_cdk.assertions import Template
from hypothesis import HealthCheck, settings

from sonic_deploy.compliance.variants import DEPLOYABLE_ACCOUNT as DEPLOYABLE_ACCOUNT
from sonic_deploy.compliance.variants import fill_placeholders
from sonic_deploy.config import Settings, load_settings
from sonic_deploy.stacks import add_stacks
from tests.cdk_context import ROOT, cli_context
from tests.fuzz import EXPLORE_SCALE
from tests.fuzz import profile as fuzz_profile

CONFIG_DIR = ROOT / "config"
pytest_plugins = ["tests.pipecat_frames", "tests.standins.fixtures"]

# Property-based tests (tests/fuzz/ holds the generators): the same examples on every run, so main stays
# green or fails the same way everywhere; no deadline, since a busy laptop is slow, not wrong; no example
# database left in the work tree. HYPOTHESIS_PROFILE=explore draws new examples, EXPLORE_SCALE times as
# many: a test's own @settings(max_examples=examples(n)) scales with it (tests/fuzz/__init__.py), and one
# without its own count draws EXPLORE_SCALE times hypothesis's default of 100.
settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "explore",
    deadline=None,
    database=None,
    max_examples=100 * EXPLORE_SCALE,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(fuzz_profile())


@cache
def synthesized(env_name: str) -> tuple[Settings, dict[str, Stack]]:
    """One synth per environment per test session (what `cdk synth -c env=NAME` would make)."""
    settings = load_settings(CONFIG_DIR, env_name)
    app = App(context=cli_context())
    stacks = add_stacks(app, settings)
    _ASSEMBLY_DIRS[env_name] = Path(app.synth().directory)
    return settings, stacks


_ASSEMBLY_DIRS: dict[str, Path] = {}


def assembly_manifest(env_name: str) -> dict[str, Any]:
    """The cloud assembly manifest of `synthesized(env_name)`."""
    synthesized(env_name)
    manifest: dict[str, Any] = json.loads((_ASSEMBLY_DIRS[env_name] / "manifest.json").read_text())
    return manifest


@cache
def template(env_name: str, route: str) -> Template:
    return Template.from_stack(synthesized(env_name)[1][route])


@pytest.fixture(scope="session")
def dev_settings() -> Settings:
    return synthesized("dev")[0]


@pytest.fixture(scope="session")
def sagemaker_template() -> Template:
    return template("dev", "sagemaker")


@pytest.fixture(scope="session")
def sagemaker_stack() -> Stack:
    return synthesized("dev")[1]["sagemaker"]


@pytest.fixture(scope="session")
def ecs_template() -> Template:
    return template("dev", "ecs")


@pytest.fixture(scope="session")
def air_gapped(tmp_path_factory: pytest.TempPathFactory) -> Template:
    """dev's ECS route in the air-gapped licence mode, with no NAT gateway."""
    config = tmp_path_factory.mktemp("air-gapped") / "config"
    shutil.copytree(CONFIG_DIR, config)
    dev = config / "environments/dev.toml"
    text = dev.read_text().replace('licence_mode = "connected"', 'licence_mode = "air-gapped"')
    dev.write_text(text.replace("nat_gateways = 1", "nat_gateways = 0"))
    return Template.from_stack(synthesize_from(config, routes=["ecs"])["ecs"])


@pytest.fixture(scope="session")
def ecs_stack() -> Stack:
    return synthesized("dev")[1]["ecs"]


# The EKS route's environment (config/environments/dev-eks.toml): a cluster the stack makes, and, the
# common case, one named in config (docs/eks.md, section 2), switched as the compliance gate's variant is.
EKS_ENV = "dev-eks"


def eks_variant(kind: str) -> Template:
    """dev-eks as the compliance gate's closed variant `kind` (routes/eks/rules.py, `closed_variants`): its one
    synth of the session (tests/compliance/conftest.py), which the invariants read too."""
    from tests.compliance.conftest import VARIANTS, templates  # it imports this module

    (variant,) = [v for v in VARIANTS if v.environment == EKS_ENV and v.kind == kind]
    return Template.from_json(templates(variant)["SonicEks"])


@pytest.fixture(scope="session")
def eks_stack() -> Stack:
    return synthesized(EKS_ENV)[1]["eks"]


@pytest.fixture(scope="session")
def eks_template() -> Template:
    return template(EKS_ENV, "eks")


@pytest.fixture(scope="session")
def eks_existing() -> Template:
    """dev-eks on an existing cluster and its VPC, named in config (placeholders filled, as a user deploys)."""
    return eks_variant("existing")


@pytest.fixture(scope="session")
def eks_air_gapped() -> Template:
    """dev-eks air-gapped: no NAT gateway, [eks.mirror], TLS from a Private CA (docs/eks.md, section 12)."""
    return eks_variant("air-gapped")


@pytest.fixture(scope="session")
def documented(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Template]:
    """dev with the canary and the agent's telemetry on: what the docs' dashboard pictures draw, and the
    agent row's and alarms' tests read."""
    config = tmp_path_factory.mktemp("documented") / "config"
    shutil.copytree(CONFIG_DIR, config)
    dev = config / "environments/dev.toml"
    text = dev.read_text().replace("# enabled = true", "enabled = true")  # the canary's
    dev.write_text(text + "\n[agent]\nenabled = true\nfirst_audio_p95_ms = 450\nerror_percent = 2\n")
    stacks = synthesize_from(config, validate=True)
    return {route: Template.from_stack(stack) for route, stack in stacks.items()}


# Under pytest-xdist, the folder where the compliance variants are synthesized once for every worker of the
# run (tests/compliance/conftest.py): xdist's recipe, the parent of the workers' basetemps, and the run's id.
SHARED_SYNTHS: list[Path] = []


@pytest.fixture(scope="session", autouse=True)
def _variants_shared_by_the_workers(tmp_path_factory: pytest.TempPathFactory) -> None:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run:
        folder = tmp_path_factory.getbasetemp().parent / f"sonic-variants-{run}"
        folder.mkdir(exist_ok=True)
        SHARED_SYNTHS[:] = [folder]


@cache
def cloudformation_validate() -> CloudFormationValidatePlugin:
    """CDK's template checks, for the synths that must still run them with CDK_VALIDATION=false (the shipped
    variants, the agent-on config): registered, they run anyway; errors fail the synth (cdk.json's flag)."""
    return CloudFormationValidatePlugin()


def synthesize_from(
    config_dir: Path, env_name: str = "dev", *, validate: bool = False, routes: Sequence[str] | None = None
) -> dict[str, Stack]:
    """Stacks from another config directory (variants the shipped config does not use); with `routes`, only
    those routes' (a route's template does not depend on the others': tests/stacks/test_environments.py)."""
    app = App(context=cli_context())
    if validate:
        Validations.of(app).add_plugins(cloudformation_validate())
    settings = load_settings(config_dir, env_name)
    if routes is not None:
        environment = settings.environment.model_copy(update={"routes": list(routes)})
        settings = dataclasses.replace(settings, environment=environment)
    stacks = add_stacks(app, settings)
    app.synth()
    return stacks


def resources_of(template: Template, type_name: str) -> dict[str, Any]:
    return dict(template.find_resources(type_name))


def rendered(value: Any) -> str:
    """A template string value as deployed, each CloudFormation reference in it shown as CFN_<function>
    (CFN_Ref, CFN_Fn_GetAtt): enough to read a generated config or script out of a template."""
    if isinstance(value, str):
        return value
    ((function, argument),) = value.items()
    if function == "Fn::Join":
        return str(argument[0]).join(rendered(part) for part in argument[1])
    return f"CFN_{function.replace('::', '_')}"


EditConfig = Callable[[str, str, str], Path]

# A copy of config/ as a user has it before a deploy (the shipped placeholders filled in).
replace_placeholders = fill_placeholders


@pytest.fixture
def deployable_config(tmp_path: Path) -> Path:
    """A copy of config/ with every shipped placeholder replaced."""
    copy = tmp_path / "deployable-config"
    shutil.copytree(CONFIG_DIR, copy)
    return replace_placeholders(copy)


@pytest.fixture
def edit_config(tmp_path: Path) -> EditConfig:
    """A copy of config/ in tmp_path; `edit_config(file, old, new)` replaces text in one of its files
    (old="" appends new) and returns the copy's directory."""
    copy = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, copy)

    def edit(file: str, old: str, new: str) -> Path:
        path = copy / file
        text = path.read_text()
        if old:
            assert old in text, f"{old!r} not in {file}"
            text = text.replace(old, new, 1)
        else:
            text += new
        path.write_text(text)
        return copy

    return edit


# The agent frameworks' tests last: what they leave on the heap (pipecat's and LiveKit's objects, by the
# million) would otherwise be walked again by the full collection each of the probe's in-process levels
# makes (measured: tests/probe took 131 s after tests/client, 101 s alone).
_LAST = ("tests/client/", "tests/connect/", "tests/examples/")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: item.nodeid.startswith(_LAST))  # a stable sort: order kept otherwise


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection loaded (every module the suite imports) lives as long as the worker: frozen out of the
    cycle collector, the full collection the probe makes at each level walks only what tests made since
    (tests/probe/test_routes.py: 21 CPU-s in the suite, 8 alone, before)."""
    gc.collect()
    gc.freeze()
