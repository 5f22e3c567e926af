"""Generators for what a cloud assembly folder may hold when something reads it: any mix of an
assembly's files (some from an earlier synth, some missing), a stamp that is whole, edited, or junk, and a
finished assembly tampered with after its stamp (TAMPERING)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
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


# What someone (or a broken copy) does to a finished assembly after its stamp was written: each leaves the
# names the stamp lists in place, so only the digest of what the assembly holds can tell.
TAMPERING = (
    "byte-in-template",
    "garbage-manifest",
    "swap-templates",
    "remove-asset",
    "change-asset",
    "extra-template",
    "extra-asset",
    "template-is-a-folder",
    "template-is-a-symlink-loop",
    "template-is-a-fifo",
    "template-is-a-symlink",
)


def tamper(folder: Path, shape: str) -> None:
    """Apply one of TAMPERING to the assembly in `folder` (SonicSageMaker and SonicEcs templates, an
    `asset.x` folder holding `index.py`)."""
    sagemaker, ecs = folder / "SonicSageMaker.template.json", folder / "SonicEcs.template.json"
    if shape == "byte-in-template":
        data = bytearray(sagemaker.read_bytes())
        data[len(data) // 2] ^= 1
        sagemaker.write_bytes(bytes(data))
    elif shape == "garbage-manifest":
        (folder / MANIFEST).write_bytes(b"\x00garbage")
    elif shape == "swap-templates":
        text = sagemaker.read_text(encoding="utf-8")
        sagemaker.write_text(ecs.read_text(encoding="utf-8"), encoding="utf-8")
        ecs.write_text(text, encoding="utf-8")
    elif shape == "remove-asset":
        shutil.rmtree(folder / "asset.x")
    elif shape == "change-asset":
        (folder / "asset.x" / "index.py").write_text("print('not the synth')\n", encoding="utf-8")
    elif shape == "extra-template":
        (folder / "Other.template.json").write_text("{}", encoding="utf-8")
    elif shape == "extra-asset":
        (folder / "asset.y").write_text("x", encoding="utf-8")
    else:
        sagemaker.unlink()
        if shape == "template-is-a-folder":
            sagemaker.mkdir()
        elif shape == "template-is-a-symlink-loop":
            sagemaker.symlink_to(sagemaker.name)
        elif shape == "template-is-a-fifo":
            os.mkfifo(sagemaker)
        else:
            sagemaker.symlink_to(ecs.name)
