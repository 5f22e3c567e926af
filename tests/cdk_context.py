"""The context the CDK CLI gives an app (sonic_deploy.compliance.context, which the compliance gate uses too)."""

from __future__ import annotations

from sonic_deploy.compliance.context import ROOT, cli_context

__all__ = ["ROOT", "cli_context"]
