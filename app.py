#!/usr/bin/env python3
"""The CDK app. The only place that reads the environment and CDK context.

cdk synth                 # the default environment (config/environments/dev.toml)
cdk synth -c env=prod     # another one
cdk synth -c config=DIR   # another config folder (default: config/ beside this file)

Run by the CDK CLI (CDK_OUTDIR set), the synth is staged and published whole, or not at all
(sonic_deploy/changes/staged_synth.py).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from sonic_deploy.interrupt import quiet_ctrl_c

# Loading aws_cdk takes seconds; Ctrl-C then (nothing staged yet) is one line, not a traceback.
with quiet_ctrl_c("sonic-deploy: synth interrupted; no assembly was written"):
    from aws_cdk import App

    from sonic_deploy.changes.assembly import Digests
    from sonic_deploy.changes.staged_synth import StagedSynth, SynthResult
    from sonic_deploy.config import load_settings
    from sonic_deploy.stacks import add_stacks

CONFIG_DIR = Path(__file__).resolve().parent / "config"


def synthesize(outdir: Path | None) -> SynthResult:
    """Build and synthesize the environment's stacks into `outdir`."""
    app = App(outdir=str(outdir)) if outdir is not None else App()
    env_name, config = app.node.try_get_context("env"), app.node.try_get_context("config")
    config_dir = Path(str(config)) if config is not None else CONFIG_DIR
    digests = Digests.of(config_dir)  # before the config is read: a file saved during synth makes it stale
    settings = load_settings(config_dir, str(env_name) if env_name is not None else None)
    stacks = add_stacks(app, settings, default_account=os.environ.get("CDK_DEFAULT_ACCOUNT"))
    app.synth()
    return settings.environment_name, config_dir, [stack.artifact_id for stack in stacks.values()], digests


def main() -> int:
    outdir = os.environ.get("CDK_OUTDIR")
    return StagedSynth(Path(outdir) if outdir else None, synthesize).main()


if __name__ == "__main__":
    sys.exit(main())
