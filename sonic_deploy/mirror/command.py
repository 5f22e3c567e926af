"""`sonic-deploy mirror --env NAME`: the commands that copy the EKS route's charts and controller images into
the environment's `[eks.mirror]`, to run where the internet is reachable (docs/eks.md, "The mirror").

Nothing is called here, AWS or otherwise: the commands are printed, a shell script on stdout. Each chart is
pulled from its upstream repository and pushed to `oci://<charts>`, where Helm puts it at `<charts>/<name>`
(helm's pkg/pusher/ocipusher.go); each image is copied with `crane copy`, which keeps its digest and, for a
multi-arch index, every platform (go-containerregistry's pkg/crane/copy.go). ECR creates no repository on a
push, so the script creates the missing ones first. Exit codes: 0 printed, 2 a config or usage mistake.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from sonic_deploy.arguments import ENVIRONMENT, config_folder
from sonic_deploy.config import ConfigError, Settings, load_settings, require_config_dir
from sonic_deploy.config.errors import MISSING
from sonic_deploy.config.loader import ENVIRONMENTS_DIR
from sonic_deploy.routes.eks.charts import (
    CHARTS,
    ChartPin,
    Image,
    mirrored_chart,
    registry_account,
    registry_host,
    registry_region,
    repository_name,
)
from sonic_deploy.routes.eks.config import EksMirrorConfig

PROG = "sonic-deploy mirror"
EXAMPLE = (
    '[eks.mirror] charts = "<account>.dkr.ecr.<region>.amazonaws.com/sonic-mirror/charts", '
    'images = "<account>.dkr.ecr.<region>.amazonaws.com/sonic-mirror"'
)


def add_parser(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "mirror",
        help="print the commands that copy the EKS route's charts and images into your ECR ([eks.mirror])",
        description="For an EKS cluster without egress: print, as a shell script, the helm and crane commands "
        "that copy the controllers' Helm charts and images from their public registries into the ECR paths "
        "of the environment's [eks.mirror]. Run it where the internet is reachable; it calls nothing itself. "
        "Cartesia's images and the services' own the stack copies at deploy.",
    )
    parser.add_argument("--env", required=True, type=ENVIRONMENT, help="environment in config/environments/")
    parser.add_argument("--config-dir", type=config_folder, default=Path("config"), help="the config/ folder")
    parser.set_defaults(func=run_mirror_command, command_parser=parser)


def run_mirror_command(args: argparse.Namespace) -> int:
    """A mistake raises ConfigError: the command line prints its one line and exits 2."""
    require_config_dir(args.config_dir)
    settings = load_settings(args.config_dir, args.env)
    env_file = args.config_dir / ENVIRONMENTS_DIR / f"{args.env}.toml"
    eks = settings.environment.eks
    if eks is None:
        raise ConfigError(
            file=env_file,
            field="eks",
            value=MISSING,
            problem=f"environment {args.env} does not deploy the EKS route, whose charts and images a mirror holds",
            fix="pass the --env of an environment with an [eks] table",
        )
    if eks.mirror is None:
        raise ConfigError(
            file=env_file,
            field="eks.mirror",
            value=MISSING,
            problem="nothing says where in your ECR the charts and images go",
            fix=f"add {EXAMPLE} (ECR in {settings.environment.region}), then run this again",
        )
    print(mirror_script(settings, eks.mirror, env_file))
    return 0


def mirror_script(settings: Settings, mirror: EksMirrorConfig, env_file: Path) -> str:
    """The script: log in, create the repositories, then each chart and each image."""
    images = _images(CHARTS)
    hosts = list(dict.fromkeys(registry_host(path) for path in (mirror.charts, mirror.images)))
    accounts = ", ".join(dict.fromkeys(registry_account(host) for host in hosts))
    region = registry_region(mirror.charts)
    lines = [
        "#!/usr/bin/env bash",
        f"# {PROG} --env {settings.environment_name}: the EKS route's {len(CHARTS)} charts and {len(images)} "
        "controller images,",
        f'# copied into the ECR paths of [eks.mirror] in {env_file} (docs/eks.md, "The mirror").',
        "# Run where the internet is reachable, with the AWS CLI, helm 3.8 or later and crane, and credentials",
        f"# that may create repositories in and push to account {accounts}'s ECR in {region}. Cartesia's images",
        "# and the services' own are not here: the stack copies them at deploy.",
        "set -euo pipefail",
        'cd "$(mktemp -d)"',
        "",
        "# Log in to the mirror's registry (the token lasts 12 hours).",
    ]
    login = f"aws ecr get-login-password --region {region}"
    for host in hosts:
        lines.append(f"{login} | helm registry login --username AWS --password-stdin {host}")
        lines.append(f"{login} | crane auth login {host} --username AWS --password-stdin")
    lines += [
        "",
        "# The repositories, each created unless it exists (ECR creates none on a push).",
        "for name in \\",
    ]
    repositories = [repository_name(mirrored_chart(pin, mirror)) for pin in CHARTS]
    repositories += [repository_name(image.mirrored(mirror.images)) for image in images]
    lines += [f"    {shlex.quote(repository)} \\" for repository in repositories]
    lines += [
        "; do",
        f'  aws ecr describe-repositories --region {region} --repository-names "$name" >/dev/null 2>&1 ||',
        f'    aws ecr create-repository --region {region} --repository-name "$name" >/dev/null',
        "done",
    ]
    lines += ["", f"# The charts, from upstream to oci://{mirror.charts}/<name>:<version>."]
    for pin in CHARTS:
        lines.append(_pull(pin))
        lines.append(f"helm push {pin.chart}-{pin.version}.tgz oci://{mirror.charts}")
    lines += ["", "# The images, same tag, same digest (a multi-arch index whole)."]
    for image in images:
        lines.append(f"crane copy {image.reference} {image.mirrored(mirror.images)}:{image.tag}")
    lines += [
        "",
        f"# Then: sonic-deploy preflight --env {settings.environment_name} checks each one is there.",
    ]
    return "\n".join(lines)


def _pull(pin: ChartPin) -> str:
    """helm pull of the pinned version into <chart>-<version>.tgz: by its oci:// reference, or by name from
    its https repository (`--repo`, helm's pkg/cmd/flags.go)."""
    if pin.oci:
        return f"helm pull {pin.repository} --version {pin.version}"
    return f"helm pull {pin.chart} --repo {pin.repository} --version {pin.version}"


def _images(charts: tuple[ChartPin, ...]) -> list[Image]:
    return list(dict.fromkeys(image for pin in charts for image in pin.images))
