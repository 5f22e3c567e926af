#!/usr/bin/env python3
"""The CDK app. The only place that reads the environment and CDK context.

cdk synth                 # the default environment (config/environments/dev.toml)
cdk synth -c env=prod     # another one
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from aws_cdk import App

from sonic_deploy.config import ConfigError, load_settings
from sonic_deploy.stacks import add_stacks

CONFIG_DIR = Path(__file__).resolve().parent / "config"


def main() -> int:
    app = App()
    env_name = app.node.try_get_context("env")
    try:
        settings = load_settings(CONFIG_DIR, str(env_name) if env_name is not None else None)
    except ConfigError as error:
        print(f"sonic-deploy: {error}", file=sys.stderr)
        return 2
    add_stacks(app, settings, default_account=os.environ.get("CDK_DEFAULT_ACCOUNT"))
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
