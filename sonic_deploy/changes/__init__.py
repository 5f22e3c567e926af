"""What a deploy would change: classify template differences per resource, mark the dangerous ones, and
keep the committed baselines honest. No aws_cdk here: it reads templates that `cdk synth` wrote."""

from sonic_deploy.changes.classify import CRITICAL_TYPES, ChangeKind, ResourceChange, StackChanges, classify
from sonic_deploy.changes.report import markdown_report, text_report
from sonic_deploy.changes.templates import find_stale_baselines

__all__ = [
    "CRITICAL_TYPES",
    "ChangeKind",
    "ResourceChange",
    "StackChanges",
    "classify",
    "find_stale_baselines",
    "markdown_report",
    "text_report",
]
