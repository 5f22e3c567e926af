"""Typed, validated settings from the committed TOML files in config/ (no aws_cdk here)."""

from sonic_deploy.config.errors import ConfigError
from sonic_deploy.config.loader import DEFAULT_ENVIRONMENT, Settings, environment_names, load_settings

__all__ = ["DEFAULT_ENVIRONMENT", "ConfigError", "Settings", "environment_names", "load_settings"]
