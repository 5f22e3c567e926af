"""Render classified changes: plain text for a terminal, Markdown for a GitHub job summary."""

from __future__ import annotations

from collections.abc import Sequence

from sonic_deploy.changes.classify import ChangeKind, ResourceChange, StackChanges

DANGER_MARK = "DANGEROUS"
REVIEW_MARK = "REVIEW"
LOGICAL_ID_COLUMN = 40


def _counts(stack: StackChanges) -> str:
    counts = ", ".join(f"{stack.count(kind)} {kind.value}" for kind in ChangeKind)
    return f"{counts}; {len(stack.dangerous)} dangerous, {len(stack.highlighted)} to review"


def _details(change: ResourceChange) -> list[str]:
    details: list[str] = []
    if change.dangerous:
        details.append(f"{DANGER_MARK}: {change.why_dangerous}")
    if change.reasons and change.kind is ChangeKind.REPLACED:
        details.append("replaced because " + "; ".join(change.reasons))
    elif change.reasons and change.kind is ChangeKind.CHANGED:
        details += change.reasons
    if change.changed and change.kind is ChangeKind.CHANGED:
        details.append("changes " + ", ".join(change.changed))
    if change.retained and change.kind in (ChangeKind.REPLACED, ChangeKind.REMOVED):
        details.append("DeletionPolicy Retain: the old resource stays in the account, outside the stack")
    details += [f"{REVIEW_MARK}: {h}" for h in change.highlights]
    return details


def text_report(stacks: Sequence[StackChanges], *, allow_dangerous: bool = False) -> str:
    lines: list[str] = []
    for stack in stacks:
        lines.append(f"{stack.stack} (compared with {stack.compared_with})")
        lines += [f"  note: {note}" for note in stack.notes]
        if not stack.changes:
            lines.append("  no resource changes")
        width = min(max((len(c.logical_id) for c in stack.changes), default=0), LOGICAL_ID_COLUMN)
        for change in stack.changes:
            marker = "!!" if change.dangerous else ("* " if change.highlights else "  ")
            name = f"{change.logical_id:<{width}}"
            lines.append(f" {marker}{change.kind.value:<9}{name}  {change.resource_type}")
            lines += [f"      {detail}" for detail in _details(change)]
        lines.append(f"  {_counts(stack)}")
        lines.append("")
    lines.append(verdict(stacks, allow_dangerous=allow_dangerous))
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_report(stacks: Sequence[StackChanges], *, allow_dangerous: bool = False) -> str:
    lines = ["## Infrastructure changes", ""]
    for stack in stacks:
        lines += [f"### `{stack.stack}`", "", f"Compared with {stack.compared_with}: {_counts(stack)}.", ""]
        lines += [f"> {note}" for note in stack.notes]
        if not stack.changes:
            lines += ["No resource changes.", ""]
            continue
        lines += ["| | change | logical ID | type | details |", "|---|---|---|---|---|"]
        for change in stack.changes:
            icon = ":no_entry:" if change.dangerous else (":warning:" if change.highlights else "")
            details = "<br>".join(_cell(d) for d in _details(change))
            lines.append(
                f"| {icon} | {change.kind.value} | `{change.logical_id}` | `{change.resource_type}` "
                f"| {details} |"
            )
        lines.append("")
    lines += [f"**{verdict(stacks, allow_dangerous=allow_dangerous)}**", ""]
    return "\n".join(lines)


def verdict(stacks: Sequence[StackChanges], *, allow_dangerous: bool) -> str:
    dangerous = [f"{s.stack}/{c.logical_id}" for s in stacks for c in s.dangerous]
    if not dangerous:
        return "No dangerous changes."
    listed = ", ".join(dangerous)
    if allow_dangerous:
        return f"Dangerous changes, explicitly allowed: {listed}."
    return (
        f"Dangerous changes: {listed}. If they are intended, allow them: locally "
        "`make diff ALLOW_DANGEROUS=1`; on a pull request, the label `allow-dangerous-changes`; "
        "in the deploy workflow, the input `allow_dangerous`."
    )
