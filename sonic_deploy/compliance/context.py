"""The context the CDK CLI gives an app, read from cdk.json the way the CLI reads it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent

# cdk.json settings the CLI turns into context keys (aws-cdk CLI: settings -> context).
_SETTING_KEYS = {
    "pathMetadata": "aws:cdk:enable-path-metadata",
    "assetMetadata": "aws:cdk:enable-asset-metadata",
    "versionReporting": "aws:cdk:version-reporting",
}
_SETTING_DEFAULTS = {"pathMetadata": True, "assetMetadata": True, "versionReporting": True}


def cli_context(**extra: Any) -> dict[str, Any]:
    """cdk.json's `context`, then cdk.context.json (as the CLI merges them), the CLI's settings, then -c."""
    cdk_json = json.loads((ROOT / "cdk.json").read_text())
    context: dict[str, Any] = dict(cdk_json.get("context", {}))
    cached = ROOT / "cdk.context.json"
    if cached.is_file():
        context.update(json.loads(cached.read_text()))
    for setting, key in _SETTING_KEYS.items():
        context[key] = cdk_json.get(setting, _SETTING_DEFAULTS[setting])
    context["aws:cdk:bundling-stacks"] = ["**"]
    context.update(extra)
    return context
