"""HYPOTHESIS_PROFILE=explore draws more examples from every property test, as tests/conftest.py says: a
test's own @settings(max_examples=...) overrides the profile's count, so each goes through examples()."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import settings

from tests.fuzz import EXPLORE_SCALE, examples

TESTS = Path(__file__).resolve().parent
# A @settings(...) decorator with a max_examples that is not examples(...): a fixed count the explore profile
# cannot raise (a decorator at the start of a line, so the docstrings that mention one do not count).
FIXED_COUNT = re.compile(r"^\s*@settings\([^)]*\bmax_examples\s*=\s*(?!examples\()", re.MULTILINE)


def test_examples_scales_under_explore_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HYPOTHESIS_PROFILE", raising=False)
    assert examples(40) == 40
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "ci")
    assert examples(40) == 40
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "explore")
    assert examples(40) == 40 * EXPLORE_SCALE


def test_every_property_test_counts_its_examples_through_examples() -> None:
    property_tests, fixed = [], []
    for path in sorted(TESTS.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if "@given" in text:
            property_tests.append(path.name)
        fixed += [f"{path.relative_to(TESTS)}: {m.group().strip()}" for m in FIXED_COUNT.finditer(text)]
    assert property_tests, "no property test found: the scan is looking in the wrong place"
    assert not fixed, f"use max_examples=examples(n) (tests/fuzz), so explore scales it: {fixed}"


def test_the_explore_profile_scales_a_test_without_its_own_count() -> None:
    default = settings.get_profile("default").max_examples
    assert settings.get_profile("ci").max_examples == default
    assert settings.get_profile("explore").max_examples == default * EXPLORE_SCALE
