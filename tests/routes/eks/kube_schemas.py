"""Offline validation of the EKS route's Kubernetes objects (docs/eks.md, section 5): built-in kinds against
kubernetes-validate's strict schemas (unknown fields refused), custom resources against the project's own
schemas in crds/, and any other kind refused. The real API server and CRDs judge them again at apply."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate

KUBERNETES_VERSION = "1.36"  # eks.kubernetes_version in the shipped config
CRDS = Path(__file__).parent / "crds"
# The custom resources the route writes: kind -> its schema file in crds/.
CUSTOM_KINDS = {
    kind: f"{kind.lower()}.json"
    for kind in (
        "NodePool",
        "EC2NodeClass",
        "ScaledObject",
        "TriggerAuthentication",
        "TargetGroupBinding",
        "SecretProviderClass",
    )
}
CLUSTER_SCOPED_BUILT_INS = frozenset({"Namespace", "ClusterRole", "ClusterRoleBinding", "StorageClass"})


class UnknownKindError(Exception):
    """Neither Kubernetes' schemas nor the project's know this kind: nothing could check it."""


@cache
def custom_validator(kind: str) -> jsonschema.protocols.Validator:
    """The project's schema for a custom resource, read and checked once a session."""
    schema = json.loads((CRDS / CUSTOM_KINDS[kind]).read_text())
    validator_class = jsonschema.validators.validator_for(schema)
    validator_class.check_schema(schema)
    validator: jsonschema.protocols.Validator = validator_class(schema)
    return validator


def validate(manifest: dict[str, Any], version: str = KUBERNETES_VERSION) -> None:
    """Raise if `manifest` is not a valid object of its kind (jsonschema.ValidationError, or
    kubernetes_validate's, a subclass of it), or if its kind is one nothing here can check (UnknownKindError)."""
    kind = manifest.get("kind")
    if not isinstance(kind, str):
        raise UnknownKindError(f"no kind: {manifest!r:.200}")
    if kind in CUSTOM_KINDS:
        custom_validator(kind).validate(manifest)
        return
    try:
        kubernetes_validate.validate(manifest, version, strict=True)
    except kubernetes_validate.SchemaNotFoundError as error:
        raise UnknownKindError(f"{kind} ({manifest.get('apiVersion')}): {error}") from error
    # Kubernetes' schemas do not know a kind's scope: a namespaced object must name its namespace.
    namespaced = kind not in CLUSTER_SCOPED_BUILT_INS
    if namespaced != ("namespace" in manifest.get("metadata", {})):
        raise jsonschema.ValidationError(
            f"{kind} {manifest['metadata'].get('name')}: metadata.namespace "
            + ("missing" if namespaced else "set on a cluster-scoped kind")
        )
