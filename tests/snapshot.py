"""Templates as syrupy JSON snapshots, with values that change without a real change scrubbed."""

from __future__ import annotations

from typing import Any

from sonic_deploy.changes.templates import ASSET_HASH


def scrubbed(template: Any) -> Any:
    """Asset hashes (in S3Key, bucket paths, parameters) become "<asset-hash>"; CDK metadata goes."""
    if isinstance(template, dict):
        return {
            key: scrubbed(value)
            for key, value in template.items()
            if key not in ("Metadata", "CDKMetadata") or not _is_cdk_metadata(value)
        }
    if isinstance(template, list):
        return [scrubbed(item) for item in template]
    if isinstance(template, str):
        return ASSET_HASH.sub("<asset-hash>", template)
    return template


def _is_cdk_metadata(value: Any) -> bool:
    return isinstance(value, dict) and (
        value.get("Type") == "AWS::CDK::Metadata" or any(str(key).startswith("aws:") for key in value)
    )
