"""Generators for what a cloud assembly folder may hold when something reads it: any mix of an
assembly's files (some from an earlier synth, some missing) and a stamp that is whole, edited, or junk."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from sonic_deploy.changes.assembly import MANIFEST

STACKS = ("SonicSageMaker", "SonicEcs", "SonicOther")
ASSEMBLY_FILES = (
    MANIFEST, "tree.json", "cdk.out", "validation-report.json",
    *(f"{stack}{suffix}" for stack in STACKS for suffix in (".template.json", ".assets.json")),
)  # fmt: skip

json_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
stamp_keys = st.sampled_from(
    ["format", "outcome", "environment", "config_digest", "source_digest", "stacks", "config_dir"]
)


@st.composite
def edited_stamps(draw: st.DrawFn, whole: dict[str, Any]) -> bytes:
    """The bytes of a stamp file: the whole stamp, one with keys changed or removed, or junk."""
    choice = draw(st.sampled_from(["whole", "edited", "json", "bytes"]))
    if choice == "whole":
        return json.dumps(whole).encode()
    if choice == "edited":
        edited = dict(whole)
        for key in draw(st.lists(stamp_keys, max_size=3)):
            if draw(st.booleans()):
                edited.pop(key, None)
            else:
                edited[key] = draw(json_values | st.lists(st.sampled_from(STACKS), max_size=3))
        return json.dumps(edited).encode()
    if choice == "json":
        return json.dumps(draw(json_values)).encode()
    return draw(st.binary(max_size=64))


def folder_contents() -> st.SearchStrategy[frozenset[str]]:
    """Which of an assembly's files are present."""
    return st.frozensets(st.sampled_from(ASSEMBLY_FILES))
