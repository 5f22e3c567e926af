"""Generators for property-based tests: hostile config values and command-line arguments; and how many
examples each property test draws under the chosen hypothesis profile."""

from __future__ import annotations

import os

EXPLORE_SCALE = 10
"""How many times more examples a property test draws under HYPOTHESIS_PROFILE=explore than under ci."""


def profile() -> str:
    """The hypothesis profile tests/conftest.py loads: $HYPOTHESIS_PROFILE, else "ci"."""
    return os.environ.get("HYPOTHESIS_PROFILE", "ci")


def examples(n: int) -> int:
    """A property test's max_examples: `n` under "ci", EXPLORE_SCALE times `n` under "explore". A test's own
    `@settings(max_examples=...)` overrides the profile's, so each test scales its count here; write
    `@settings(max_examples=examples(200))`, never a bare number."""
    return n * EXPLORE_SCALE if profile() == "explore" else n
