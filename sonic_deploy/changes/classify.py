"""Classify the change between two templates of one stack, per logical resource: added, changed, replaced
or removed; mark the dangerous ones (replacement or deletion of stateful or serving resources) and
highlight permission and network changes."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sonic_deploy.changes.permissions import permission_highlights
from sonic_deploy.changes.replacement import DEFAULT_SCHEMA_REGION, create_only_values, replacing_changes
from sonic_deploy.changes.templates import Template, resources

CRITICAL_TYPES: dict[str, str] = {
    "AWS::SageMaker::Endpoint": "the endpoint clients call (a new one has no traffic history and may lack "
    "capacity)",
    "AWS::SageMaker::Model": "the Marketplace model (recreating it needs the subscription and a new endpoint "
    "config)",
    "AWS::ECS::Service": "the ECS service that serves speech",
    "AWS::EC2::PlacementGroup": "the placement group the GPU instances are packed into",
    "AWS::ECR::Repository": "an image repository (deleting it deletes its images)",
    "AWS::KMS::Key": "an encryption key (data encrypted with it becomes unreadable once it is deleted)",
    "AWS::SecretsManager::Secret": "a secret (its value is lost)",
    "AWS::EC2::VPC": "the VPC (a new one replaces every subnet, endpoint, task network interface and the load "
    "balancer; an EFS file system cannot have mount targets in two VPCs at once)",
    "AWS::EFS::FileSystem": "the file system that keeps the offline licence",
    # The EKS route. A replacement of the first two drops live calls; CloudFormation replaces a custom
    # resource only when its handler returns a new physical ID, so the last two are dangerous when removed,
    # which a new logical ID is too: the old one's delete then undoes what the new one applied.
    "AWS::EKS::Cluster": "the EKS cluster (a new one starts empty: every node, pod and live call goes with the "
    "old one, and a cluster named in config cannot be created beside it)",
    "AWS::EKS::Nodegroup": "the system node group, which runs the API servers, NATS, Karpenter and the "
    "controllers (a new one drains the old nodes, dropping the calls on their API servers)",
    # Deleting an instance profile a running instance uses "will break any applications running on the
    # instance" (IAM API Reference, DeleteInstanceProfile): a replacement deletes the old one after the swap.
    "AWS::IAM::InstanceProfile": "the GPU hosts' (ECS) or GPU nodes' (EKS, Karpenter's node class) instance "
    "profile (a new one leaves running instances on the deleted one: the ECS agent or kubelet loses its "
    "credentials, and the workers on it their live calls)",
    "Custom::AWSCDK-EKS-KubernetesResource": "Kubernetes objects the stack applies (the workloads, the GPU "
    "NodePools): removing one deletes them from the cluster, and the API servers, workers or GPU nodes with "
    "their live calls",
    "Custom::AWSCDK-EKS-HelmChart": "a Helm release (Karpenter and its CRDs, the load balancer controller, "
    "KEDA, the GPU device plugin and exporter, the Secrets Store CSI driver): removing one uninstalls it; "
    "Karpenter's CRDs take the NodePools and their GPU nodes, dropping live calls, the rest stop new pods "
    "getting targets, scaling, GPUs or secrets",
}
"""Replacing or removing one of these fails the check unless explicitly allowed."""

COMPARED_ATTRIBUTES = (
    "Type",
    "Properties",
    "DependsOn",
    "Condition",
    "DeletionPolicy",
    "UpdateReplacePolicy",
    "UpdatePolicy",
    "CreationPolicy",
)
"""Metadata is left out on purpose: CDK puts construct paths and asset hints there; it deploys nothing."""

RETAIN_POLICIES = frozenset({"Retain", "RetainExceptOnCreate"})
REFERENCE_FUNCTIONS = ("Ref", "Fn::GetAtt")


class ChangeKind(StrEnum):
    ADDED = "added"
    CHANGED = "changed"
    REPLACED = "replaced"
    REMOVED = "removed"


@dataclass(frozen=True)
class ResourceChange:
    """One logical resource that differs between the two templates."""

    logical_id: str
    resource_type: str
    kind: ChangeKind
    changed: tuple[str, ...] = ()
    """Top-level properties (or resource attributes such as DeletionPolicy) whose value differs."""
    reasons: tuple[str, ...] = ()
    """Why it is replaced."""
    highlights: tuple[str, ...] = ()
    """IAM, security group, widening: what a reviewer must read."""
    retained: bool = False
    """DeletionPolicy Retain: a removed or replaced resource stays in the account, outside the stack."""

    @property
    def dangerous(self) -> bool:
        return self.kind in (ChangeKind.REPLACED, ChangeKind.REMOVED) and self.resource_type in CRITICAL_TYPES

    @property
    def why_dangerous(self) -> str:
        return CRITICAL_TYPES.get(self.resource_type, "")


@dataclass(frozen=True)
class StackChanges:
    """Every resource change of one stack, compared with a baseline or with what is deployed."""

    stack: str
    compared_with: str
    changes: tuple[ResourceChange, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def dangerous(self) -> tuple[ResourceChange, ...]:
        return tuple(c for c in self.changes if c.dangerous)

    @property
    def highlighted(self) -> tuple[ResourceChange, ...]:
        return tuple(c for c in self.changes if c.highlights)

    def count(self, kind: ChangeKind) -> int:
        return sum(1 for c in self.changes if c.kind is kind)


def classify(
    before: Template,
    after: Template,
    *,
    stack: str = "stack",
    compared_with: str = "baseline",
    region: str = DEFAULT_SCHEMA_REGION,
) -> StackChanges:
    """Compare `before` (baseline or deployed) with `after` (freshly synthesized)."""
    old, new = resources(before), resources(after)
    changes: dict[str, ResourceChange] = {}
    for logical_id in sorted(new.keys() - old.keys()):
        resource = new[logical_id]
        changes[logical_id] = ResourceChange(
            logical_id,
            _type(resource),
            ChangeKind.ADDED,
            highlights=tuple(permission_highlights(_type(resource), None, _properties(resource))),
        )
    for logical_id in sorted(old.keys() - new.keys()):
        resource = old[logical_id]
        changes[logical_id] = ResourceChange(
            logical_id,
            _type(resource),
            ChangeKind.REMOVED,
            reasons=("no longer in the template (a changed construct ID looks like this too)",),
            highlights=tuple(permission_highlights(_type(resource), _properties(resource), None)),
            retained=_retained(resource),
        )
    for logical_id in sorted(old.keys() & new.keys()):
        change = _compare(logical_id, old[logical_id], new[logical_id], region)
        if change is not None:
            changes[logical_id] = change
    _propagate_replacements(old, new, changes, region)
    order = list(ChangeKind)
    ordered = sorted(changes.values(), key=lambda c: (order.index(c.kind), c.logical_id))
    return StackChanges(stack, compared_with, tuple(ordered))


def _type(resource: Mapping[str, Any]) -> str:
    return str(resource.get("Type", "?"))


def _properties(resource: Mapping[str, Any]) -> Mapping[str, Any]:
    properties = resource.get("Properties") or {}
    return properties if isinstance(properties, Mapping) else {}


def _retained(resource: Mapping[str, Any]) -> bool:
    return resource.get("DeletionPolicy") in RETAIN_POLICIES


def _compare(
    logical_id: str, old: Mapping[str, Any], new: Mapping[str, Any], region: str
) -> ResourceChange | None:
    changed = [a for a in COMPARED_ATTRIBUTES if a != "Properties" and old.get(a) != new.get(a)]
    old_props, new_props = _properties(old), _properties(new)
    changed += sorted(k for k in old_props.keys() | new_props.keys() if old_props.get(k) != new_props.get(k))
    if not changed:
        return None
    resource_type = _type(new)
    if _type(old) != resource_type:
        reasons = [f"type changes from {_type(old)}"]
    else:
        reasons = replacing_changes(resource_type, old_props, new_props, region)
    return ResourceChange(
        logical_id,
        resource_type,
        ChangeKind.REPLACED if reasons else ChangeKind.CHANGED,
        changed=tuple(changed),
        reasons=tuple(reasons),
        highlights=tuple(permission_highlights(resource_type, old_props, new_props)),
        retained=_retained(old),
    )


def _references(value: Any) -> Iterator[str]:
    """Logical IDs a value refers to with Ref, Fn::GetAtt or Fn::Sub."""
    if isinstance(value, Mapping):
        for function, argument in value.items():
            if function == "Ref" and isinstance(argument, str):
                yield argument
            elif function == "Fn::GetAtt":
                target = argument[0] if isinstance(argument, list) else str(argument).split(".")[0]
                yield str(target)
            elif function == "Fn::Sub":
                text = argument[0] if isinstance(argument, list) else argument
                for name in str(text).split("${")[1:]:
                    yield name.split("}")[0].split(".")[0]
                yield from _references(argument)
            else:
                yield from _references(argument)
    elif isinstance(value, list):
        for item in value:
            yield from _references(item)


def _propagate_replacements(
    old: Mapping[str, Mapping[str, Any]],
    new: Mapping[str, Mapping[str, Any]],
    changes: dict[str, ResourceChange],
    region: str,
) -> None:
    """A resource whose create-only property refers to a replaced resource gets a new value at deploy time
    (a new name or ARN), so it is replaced too, although its own template text did not change."""
    while True:
        replaced = {k for k, c in changes.items() if c.kind is ChangeKind.REPLACED}
        newly: dict[str, ResourceChange] = {}
        for logical_id in sorted(old.keys() & new.keys()):
            if logical_id in replaced:
                continue
            resource = new[logical_id]
            for path, value in create_only_values(_type(resource), _properties(resource), region).items():
                hit = sorted(set(_references(value)) & replaced)
                if hit:
                    reason = f"{path} is create-only and refers to {', '.join(hit)}, which is replaced"
                    newly[logical_id] = _replaced_by_reference(
                        logical_id, resource, old[logical_id], changes.get(logical_id), reason
                    )
                    break
        if not newly:
            break
        changes.update(newly)
    _mark_updated_by_reference(old, new, changes)


def _mark_updated_by_reference(
    old: Mapping[str, Mapping[str, Any]],
    new: Mapping[str, Mapping[str, Any]],
    changes: dict[str, ResourceChange],
) -> None:
    """A resource whose template text is unchanged but which refers to a replaced resource is updated at
    deploy time (e.g. the endpoint moves to a replaced endpoint config): list it as changed."""
    replaced = {k for k, c in changes.items() if c.kind is ChangeKind.REPLACED}
    for logical_id in sorted((old.keys() & new.keys()) - changes.keys()):
        resource = new[logical_id]
        hit = sorted(set(_references(_properties(resource))) & replaced)
        if hit:
            changes[logical_id] = ResourceChange(
                logical_id,
                _type(resource),
                ChangeKind.CHANGED,
                reasons=(f"updated in place: it refers to {', '.join(hit)}, which is replaced",),
            )


def _replaced_by_reference(
    logical_id: str,
    resource: Mapping[str, Any],
    old_resource: Mapping[str, Any],
    existing: ResourceChange | None,
    reason: str,
) -> ResourceChange:
    return ResourceChange(
        logical_id,
        _type(resource),
        ChangeKind.REPLACED,
        changed=existing.changed if existing else (),
        reasons=(*(existing.reasons if existing else ()), reason),
        highlights=existing.highlights if existing else (),
        retained=_retained(old_resource),
    )
