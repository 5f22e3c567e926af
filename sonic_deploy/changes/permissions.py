"""Changes to who may do what: IAM policies (anywhere in a resource: roles, policies, key and repository
policies), managed-policy attachments and security-group ingress. Widening is flagged, never hidden."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

IAM_PREFIX = "AWS::IAM::"
SECURITY_GROUP_TYPES = frozenset(
    {"AWS::EC2::SecurityGroup", "AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress"}
)
OPEN_CIDRS = frozenset({"0.0.0.0/0", "::/0"})
SHOWN_GRANTS = 3
SHOWN_CHARACTERS = 100


class Grant(NamedTuple):
    """One (effect, action, resource, principal, condition) cell of a policy statement."""

    effect: str
    action: str
    resource: str
    principal: str
    condition: str

    def describe(self) -> str:
        text = self.action if self.resource == "-" else f"{self.action} on {shortened(self.resource)}"
        if self.principal != "-":
            text += f" to {shortened(self.principal)}"
        if self.condition != "-":
            text += " (with conditions)"
        return text


def compact(value: Any) -> str:
    """A short, stable text for a policy value that may be an intrinsic function: references read like
    Fn::Sub (`arn:${AWS::Partition}:iam::aws:policy/X`, `${Cluster.Arn}`)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and len(value) == 1:
        ((function, argument),) = value.items()
        if function == "Ref":
            return f"${{{argument}}}"
        if function == "Fn::GetAtt" and isinstance(argument, list):
            return "${" + ".".join(str(part) for part in argument) + "}"
        if function == "Fn::Join" and isinstance(argument, list) and len(argument) == 2:
            delimiter, parts = argument
            if isinstance(delimiter, str) and isinstance(parts, list):
                return delimiter.join(compact(part) for part in parts)
        if function == "Fn::Sub" and isinstance(argument, str):
            return argument
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def shortened(text: str, limit: int = SHOWN_CHARACTERS) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _principals(statement: Mapping[str, Any]) -> list[str]:
    for key in ("Principal", "NotPrincipal"):
        principal = statement.get(key)
        if principal is None:
            continue
        prefix = "not " if key == "NotPrincipal" else ""
        if isinstance(principal, Mapping):
            return [f"{prefix}{kind}:{compact(p)}" for kind, ps in principal.items() for p in _as_list(ps)]
        return [f"{prefix}{compact(principal)}"]
    return ["-"]


def statement_grants(statement: Mapping[str, Any]) -> set[Grant]:
    effect = str(statement.get("Effect", "Allow"))
    actions = [compact(a) for a in _as_list(statement.get("Action"))]
    actions += [f"not {compact(a)}" for a in _as_list(statement.get("NotAction"))]
    resources = [compact(r) for r in _as_list(statement.get("Resource"))]
    resources += [f"not {compact(r)}" for r in _as_list(statement.get("NotResource"))]
    condition = statement.get("Condition")
    condition_text = "-" if condition is None else json.dumps(condition, sort_keys=True)
    return {
        Grant(effect, action, resource, principal, condition_text)
        for action in actions or ["-"]
        for resource in resources or ["-"]
        for principal in _principals(statement)
    }


def policy_documents(value: Any) -> Iterator[Mapping[str, Any]]:
    """Every policy document (an object with a Statement) nested anywhere in a resource's properties."""
    if isinstance(value, Mapping):
        if "Statement" in value:
            yield value
            return
        for item in value.values():
            yield from policy_documents(item)
    elif isinstance(value, list):
        for item in value:
            yield from policy_documents(item)


def grants(properties: Mapping[str, Any] | None) -> set[Grant]:
    found: set[Grant] = set()
    for document in policy_documents(properties or {}):
        for statement in _as_list(document.get("Statement")):
            if isinstance(statement, Mapping):
                found |= statement_grants(statement)
    return found


def widening(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> list[str]:
    """What a change grants that was not granted before: new Allow cells, removed Deny cells, new managed
    policies. Narrowing is not reported here (the change itself is listed anyway)."""
    old, new = grants(before), grants(after)
    allowed = sorted(g for g in new - old if g.effect == "Allow")
    undenied = sorted(g for g in old - new if g.effect == "Deny")
    found: list[str] = []
    if allowed:
        shown = "; ".join(g.describe() for g in allowed[:SHOWN_GRANTS])
        more = f" and {len(allowed) - SHOWN_GRANTS} more" if len(allowed) > SHOWN_GRANTS else ""
        found.append(f"widens permissions: allows {shown}{more}")
    if undenied:
        found.append(f"widens permissions: no longer denies {'; '.join(g.describe() for g in undenied)}")
    old_managed = {compact(a) for a in _as_list((before or {}).get("ManagedPolicyArns"))}
    new_managed = [compact(a) for a in _as_list((after or {}).get("ManagedPolicyArns"))]
    attached = [arn for arn in new_managed if arn not in old_managed]
    if attached:
        found.append(f"widens permissions: attaches {', '.join(attached)}")
    return found


def _open_ingress(resource_type: str, properties: Mapping[str, Any] | None) -> set[str]:
    if properties is None:
        return set()
    if resource_type == "AWS::EC2::SecurityGroupIngress":
        rules: list[Any] = [properties]
    elif resource_type == "AWS::EC2::SecurityGroup":
        rules = _as_list(properties.get("SecurityGroupIngress"))
    else:
        return set()
    opened = set()
    for rule in rules:
        if not isinstance(rule, Mapping):
            continue
        cidr = rule.get("CidrIp") or rule.get("CidrIpv6")
        # A CIDR taken from a parameter or another resource (Fn::GetAtt VPC.CidrBlock) is not "anywhere".
        if isinstance(cidr, str) and cidr in OPEN_CIDRS:
            ports = f"{rule.get('FromPort', 'all')}-{rule.get('ToPort', 'all')}"
            opened.add(f"{rule.get('IpProtocol', '?')} {ports} from {cidr}")
    return opened


def permission_highlights(
    resource_type: str, before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
) -> list[str]:
    """Why a reviewer must look at this change (empty when it touches no permission or network rule).

    `before`/`after` are the resource's Properties; None when the resource is added or removed."""
    found: list[str] = []
    if resource_type.startswith(IAM_PREFIX):
        found.append("IAM")
    elif resource_type in SECURITY_GROUP_TYPES:
        found.append("security group")
    elif grants(before) != grants(after):
        found.append("resource policy")
    found += widening(before, after)
    opened = sorted(_open_ingress(resource_type, after) - _open_ingress(resource_type, before))
    if opened:
        found.append(f"opens ingress to the internet: {', '.join(opened)}")
    return found
