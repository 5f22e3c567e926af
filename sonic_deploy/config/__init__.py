"""Typed, validated settings from the committed TOML files in config/ (no aws_cdk here)."""

from sonic_deploy.config.errors import ConfigError
from sonic_deploy.config.loader import (
    STACK_IDS,
    Settings,
    cloudformation_stack_name,
    environment_names,
    load_settings,
    require_config_dir,
)
from sonic_deploy.config.rules import DEFAULT_ENVIRONMENT

__all__ = [
    "DEFAULT_ENVIRONMENT",
    "STACK_IDS",
    "ConfigError",
    "Settings",
    "cloudformation_stack_name",
    "environment_names",
    "load_settings",
    "require_config_dir",
]
