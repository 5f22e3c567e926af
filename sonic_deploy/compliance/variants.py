"""What the gate scans: each environment as a user deploys it (the shipped placeholders filled in, which
`make deploy` would otherwise refuse), and the closed variants its routes offer (`closed_variants` in each
route's rules module): the ECS route's, connected as shipped, air-gapped with TLS from a Private CA, deletion
protection, the resilience rehearsal, the probe task's turn hops and `[ecs.capacity]`'s types, targeted
reservations and fallback AZ on; the EKS route's, on a cluster it makes, air-gapped with TLS from a Private CA,
and on an existing cluster and VPC. Beside them, the branches variant (BRANCHES: secrets created, Spot, the
canary on ECS, TLS from a certificate ARN) is synthesized for the bootstrap policy's and the invariants'
tests, not scanned: between them all, both sides of every switch that changes resource types or actions."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from sonic_deploy.config import DEFAULT_ENVIRONMENT, environment_names, load_settings
from sonic_deploy.routes import ROUTES

# What stands in for each shipped placeholder: an account, a registry, a tag, an on-call address and the
# address variables' names, of the shapes a user writes.
DEPLOYABLE_ACCOUNT = "210987654321"
_FILLED = (
    ('"REPLACE-ME.pkg.dev', '"europe-docker.pkg.dev'),
    ('tag = "REPLACE-ME"', 'tag = "1.0.0"'),
    ("123456789012", DEPLOYABLE_ACCOUNT),
    ("oncall@example.com", "oncall@sonic.test"),
    ('"REPLACE-ME_NATS_URL"', '"NATS_URL"'),
    ('"REPLACE-ME_LICENSE_PROXY_URL"', '"LICENSE_PROXY_URL"'),
)


# The Private CA the closed variants' TLS comes from (a route's switches name it as {private_ca}).
PRIVATE_CA = (
    "arn:aws:acm-pca:{region}:"
    + DEPLOYABLE_ACCOUNT
    + ":certificate-authority/0b4f6e3a-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
)


# What the branches variant switches on in the default environment (dev): every branch of config that
# changes the resource types or the actions the stacks need and that neither an environment nor the closed
# variant has: secrets the stack creates (so no image copy), Spot, the canary on ECS, TLS from a certificate
# ARN, AWS's recommended AMI. The bootstrap policy test synthesizes it; the gate does not scan it.
CERTIFICATE = (
    "arn:aws:acm:{region}:" + DEPLOYABLE_ACCOUNT + ":certificate/0b4f6e3a-1c2d-4e5f-8a9b-0c1d2e3f4a5c"
)
_BRANCHES = (
    (r"(?m)^copy_images = true$", "copy_images = false"),
    (r"(?m)^\[ecs\.secrets\]$", "[ecs.secrets]\ncreate = true"),
    (r"(?m)^# enabled = true$", "enabled = true"),  # [canary]
    (
        r"(?m)^tls = false$",
        'tls = true\ndomain_name = "sonic.{environment}.internal.example.com"\ncertificate_arn = "{certificate}"',
    ),
    (r"(?m)^# \[ecs\.capacity\]$", "[ecs.capacity]"),
    (r'(?m)^# ami = ".*$', 'ami = "recommended"'),
    (r'(?m)^# market = "spot".*$', 'market = "spot"'),
)


@dataclass(frozen=True)
class Variant:
    """An environment as shipped; or, with `kind`, a closed variant of it a route offers (`ClosedVariant`: its
    `switches` in the environment's file, `title` what they switch on); or the branches variant."""

    environment: str
    kind: str = ""
    title: str = ""
    switches: tuple[tuple[str, str], ...] = ()
    branches: bool = False

    @property
    def closed(self) -> bool:
        return bool(self.kind)

    @property
    def name(self) -> str:
        if self.branches:
            return f"{self.environment} (created secrets, Spot, canary, TLS from an ACM certificate)"
        return f"{self.environment} ({self.title})" if self.closed else self.environment

    @property
    def slug(self) -> str:
        if self.branches:
            return f"{self.environment}-branches"
        return f"{self.environment}-{self.kind}" if self.closed else self.environment


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


def switch(config: Path, environment: str, switches: tuple[tuple[str, str], ...], what: str) -> Path:
    """In a copy of config/, the environment's file with each (pattern, replacement) applied: each pattern
    must match once; a replacement's {environment}, {private_ca} and {certificate} are filled in."""
    path = config / "environments" / f"{environment}.toml"
    text = path.read_text(encoding="utf-8")
    region = load_settings(config, environment).environment.region
    for pattern, replacement in switches:
        filled = replacement.format(
            environment=environment,
            private_ca=PRIVATE_CA.format(region=region),
            certificate=CERTIFICATE.format(region=region),
        )
        text, count = re.subn(pattern, filled.replace("\\", "\\\\"), text)
        if count != 1:
            raise ValueError(
                f"{path}: expected one line matching {pattern!r} (the {what} variant switches it)"
            )
    path.write_text(text, encoding="utf-8")
    return config


def make_branches(config: Path, environment: str) -> Path:
    """The environment in a copy of config/ with the branches _BRANCHES lists switched on."""
    return switch(config, environment, _BRANCHES, "branches")


def variants(config_dir: Path) -> list[Variant]:
    """Every environment, then the closed variants each route of each environment offers (its rules module's
    `closed_variants`): the settings its table leaves off that change resources or actions, switched on."""
    found = [Variant(name) for name in environment_names(config_dir)]
    for name in environment_names(config_dir):
        env = load_settings(config_dir, name).environment
        found += [
            Variant(name, offered.slug, offered.title, offered.switches)
            for route in env.routes
            for offered in ROUTES[route].rules_module().closed_variants(env)
        ]
    return found


def config_for(variant: Variant, config_dir: Path, workdir: Path) -> Path:
    """A deployable copy of config_dir for the variant, under workdir."""
    copy = workdir / f"config-{variant.slug}"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(config_dir, copy)
    fill_placeholders(copy)
    if variant.branches:
        return make_branches(copy, variant.environment)
    return switch(copy, variant.environment, variant.switches, variant.kind) if variant.closed else copy


# The default environment with every branch the gate's variants leave off switched on.
BRANCHES = Variant(DEFAULT_ENVIRONMENT, branches=True)
