"""Does an update replace a resource? Answered offline from the CloudFormation resource provider schemas
that cfn-lint ships: a change to a `createOnlyProperties` entry means CloudFormation creates a new resource
and deletes the old one; a type without an update handler is replaced on any property change."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

DEFAULT_SCHEMA_REGION = "us-east-1"
_ABSENT = object()


@dataclass(frozen=True)
class UpdateBehaviour:
    """What the schema says about updating one resource type."""

    known: bool
    create_only: tuple[tuple[str, ...], ...]
    updatable: bool


@cache
def update_behaviour(resource_type: str, region: str = DEFAULT_SCHEMA_REGION) -> UpdateBehaviour:
    """The create-only property paths of a type (as key tuples; "*" stands for every array item)."""
    schema = _schema(resource_type, region) or _schema(resource_type, DEFAULT_SCHEMA_REGION)
    if schema is None:
        return UpdateBehaviour(known=False, create_only=(), updatable=True)
    pointers: Sequence[str] = schema.get("createOnlyProperties") or ()
    paths = tuple(
        tuple(p.removeprefix("/properties/").split("/")) for p in pointers if p.startswith("/properties/")
    )
    handlers = schema.get("handlers")
    updatable = not isinstance(handlers, Mapping) or "update" in handlers
    return UpdateBehaviour(known=True, create_only=paths, updatable=updatable)


def _schema(resource_type: str, region: str) -> Mapping[str, Any] | None:
    if resource_type.startswith("Custom::") or resource_type == "AWS::CloudFormation::CustomResource":
        return None
    # Loaded on first use: cfn-lint takes most of a second to import, which the commands every make target
    # runs (`environments`, `target`) never need. It ships no type information (no py.typed marker).
    from cfnlint.schema.manager import PROVIDER_SCHEMA_MANAGER  # type: ignore[import-untyped]

    try:
        schema: Mapping[str, Any] = PROVIDER_SCHEMA_MANAGER.get_resource_schema(region, resource_type).schema
    except Exception:  # cfn-lint raises its own ResourceNotFoundError (and KeyError for unknown Regions)
        return None
    return schema


def value_at(properties: Any, path: Sequence[str]) -> Any:
    """The value at a property path, `_ABSENT` when missing; a "*" step collects every array item."""
    current = properties
    for index, key in enumerate(path):
        if key == "*":
            if not isinstance(current, list):
                return _ABSENT
            return [value_at(item, path[index + 1 :]) for item in current]
        if not isinstance(current, Mapping) or key not in current:
            return _ABSENT
        current = current[key]
    return current


def display_path(path: Sequence[str]) -> str:
    return ".".join(path).replace(".*", "[]")


def replacing_changes(
    resource_type: str,
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    region: str = DEFAULT_SCHEMA_REGION,
) -> list[str]:
    """Why updating `before` to `after` (the resource's Properties) replaces the resource; [] if not."""
    behaviour = update_behaviour(resource_type, region)
    if not behaviour.known:
        return []
    if not behaviour.updatable and before != after:
        return [f"{resource_type} cannot be updated in place"]
    return [
        f"{display_path(path)} is create-only"
        for path in behaviour.create_only
        if value_at(before, path) != value_at(after, path)
    ]


def create_only_values(resource_type: str, properties: Mapping[str, Any], region: str) -> dict[str, Any]:
    """The values of the create-only properties a resource sets, by display path (for reference tracking)."""
    behaviour = update_behaviour(resource_type, region)
    if not behaviour.updatable:
        return {"(any property)": dict(properties)}
    found: dict[str, Any] = {}
    for path in behaviour.create_only:
        value = value_at(properties, path)
        if value is not _ABSENT:
            found[display_path(path)] = value
    return found
