"""Typed, validated settings from the committed TOML files in config/ (no aws_cdk here)."""

from sonic_deploy.config.errors import ConfigError
from sonic_deploy.config.loader import Settings, environment_names, load_settings, require_config_dir
from sonic_deploy.config.rules import DEFAULT_ENVIRONMENT

__all__ = [
    "DEFAULT_ENVIRONMENT",
    "ConfigError",
    "Settings",
    "environment_names",
    "load_settings",
    "require_config_dir",
]
