"""What the gate scans: each environment as a user deploys it (the shipped placeholders filled in, which
`make deploy` would otherwise refuse), and the air-gapped variant of each environment with the ECS route."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from sonic_deploy.config import environment_names, load_settings

# What stands in for each shipped placeholder: an account, a registry, a tag and an on-call address of the
# shapes a user writes.
DEPLOYABLE_ACCOUNT = "210987654321"
_FILLED = (
    ('"REPLACE-ME.pkg.dev', '"europe-docker.pkg.dev'),
    ('tag = "REPLACE-ME"', 'tag = "1.0.0"'),
    ("123456789012", DEPLOYABLE_ACCOUNT),
    ("oncall@example.com", "oncall@sonic.test"),
)


@dataclass(frozen=True)
class Variant:
    environment: str
    air_gapped: bool = False

    @property
    def name(self) -> str:
        return f"{self.environment} (air-gapped)" if self.air_gapped else self.environment

    @property
    def slug(self) -> str:
        return f"{self.environment}-air-gapped" if self.air_gapped else self.environment


def fill_placeholders(config: Path) -> Path:
    """In a copy of config/, put what a user writes before a deploy in place of each shipped placeholder:
    the model-package ARN confirmed, images named, a real account and on-call address."""
    packages = config / "model_packages.toml"
    packages.write_text(re.sub(r"(?ms)^unconfirmed = \[.*?\]\n", "", packages.read_text()), encoding="utf-8")
    for env_file in (config / "environments").glob("*.toml"):
        text = env_file.read_text(encoding="utf-8")
        for placeholder, value in _FILLED:
            text = text.replace(placeholder, value)
        env_file.write_text(text, encoding="utf-8")
    return config


def make_air_gapped(config: Path, environment: str) -> Path:
    """The environment in a copy of config/, switched to the air-gapped licence mode with no NAT gateway."""
    path = config / "environments" / f"{environment}.toml"
    text = path.read_text(encoding="utf-8")
    text, modes = re.subn(r'(?m)^licence_mode = "connected"', 'licence_mode = "air-gapped"', text)
    text, nats = re.subn(r"(?m)^nat_gateways = \d+", "nat_gateways = 0", text)
    if modes != 1 or nats != 1:
        raise ValueError(f"{path}: expected one `licence_mode` and one `nat_gateways` line in [ecs]")
    path.write_text(text, encoding="utf-8")
    return config


def variants(config_dir: Path) -> list[Variant]:
    """Every environment, then the air-gapped variant of those that deploy the ECS route connected."""
    found = [Variant(name) for name in environment_names(config_dir)]
    for name in environment_names(config_dir):
        ecs = load_settings(config_dir, name).environment.ecs
        if ecs is not None and ecs.licence_mode == "connected":
            found.append(Variant(name, air_gapped=True))
    return found


def config_for(variant: Variant, config_dir: Path, workdir: Path) -> Path:
    """A deployable copy of config_dir for the variant, under workdir."""
    copy = workdir / f"config-{variant.slug}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(config_dir, copy)
    fill_placeholders(copy)
    return make_air_gapped(copy, variant.environment) if variant.air_gapped else copy
