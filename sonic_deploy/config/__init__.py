"""Typed, validated settings from the committed TOML files in config/ (no aws_cdk here).

The loader's names load on first use (PEP 562): a route's model (`sonic_deploy.routes.<route>.config`)
imports this package's base modules and the loader imports the routes' models, so importing this package
from a route's model must not start the loader."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from sonic_deploy.config.errors import ConfigError

if TYPE_CHECKING:
    from sonic_deploy.config.base import DEFAULT_ENVIRONMENT
    from sonic_deploy.config.loader import (
        STACK_IDS,
        Settings,
        cloudformation_stack_name,
        environment_names,
        load_settings,
        require_config_dir,
    )

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

# Name -> the module that defines it.
_MODULES = {
    "DEFAULT_ENVIRONMENT": "sonic_deploy.config.base",
    "STACK_IDS": "sonic_deploy.config.loader",
    "Settings": "sonic_deploy.config.loader",
    "cloudformation_stack_name": "sonic_deploy.config.loader",
    "environment_names": "sonic_deploy.config.loader",
    "load_settings": "sonic_deploy.config.loader",
    "require_config_dir": "sonic_deploy.config.loader",
}


def __getattr__(name: str) -> object:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
