"""docs/deploy.md names only commands, files and settings that exist."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from sonic_deploy.config import STACK_IDS

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs/deploy.md").read_text(encoding="utf-8")
# Commands: in `backticks`, or at the start of a line in a code block.
MAKE_TARGETS = sorted(set(re.findall(r"(?:^|`)make ([a-z][\w-]*)", DOC, flags=re.MULTILINE)))


def test_the_doc_covers_every_target_of_the_walkthrough() -> None:
    assert {"diff", "baseline", "bootstrap", "deploy", "destroy"} <= set(MAKE_TARGETS)


@pytest.mark.parametrize("target", MAKE_TARGETS)
def test_every_make_target_in_the_doc_exists(target: str) -> None:
    result = subprocess.run(
        ["make", "-n", target, "ENV=dev", "ROUTE=sagemaker", "DEPLOY_SETUP="],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert "No rule to make target" not in result.stderr, result.stderr


def test_files_and_settings_the_doc_names_exist() -> None:
    for path in re.findall(r"`((?:config|\.github/workflows)/[\w./-]+\.(?:toml|yml))`", DOC):
        assert (REPO / path).is_file(), path
    for stack_id in STACK_IDS.values():
        assert stack_id in DOC
    workflows = "".join(p.read_text(encoding="utf-8") for p in (REPO / ".github/workflows").glob("*.yml"))
    for name in ("AWS_DIFF_ROLE_ARN", "AWS_DEPLOY_ROLE_ARN", "allow-dangerous-changes", "allow_dangerous"):
        assert name in DOC and name in workflows, name


def test_every_cost_figure_has_a_source_in_its_paragraph() -> None:
    for paragraph in re.split(r"\n\s*- |\n\n", DOC):
        if "$" in paragraph.replace("`", ""):
            assert "https://" in paragraph or "config/prices.toml" in paragraph, paragraph
