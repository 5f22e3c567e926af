"""Pydantic's validation errors, rewritten in the user's terms: file, field, value, problem, fix."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import get_origin

from pydantic import BaseModel, ValidationError

from sonic_deploy.config.errors import MISSING, ConfigError


def explain(path: Path, model: type[BaseModel], error: ValidationError) -> ConfigError:
    """The first validation error, rewritten in the user's terms. An unknown key comes first: a misspelt
    key also makes the key it was meant to be look missing."""
    errors = error.errors()
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = [str(part) for part in first["loc"]]
    field = toml_path(first["loc"])  # the original parts: an int is a list index, written [1]
    kind = first["type"]
    if kind == "extra_forbidden":
        known = known_keys(model, loc[:-1])
        guess = difflib.get_close_matches(loc[-1], known, n=1)
        hint = f"did you mean '{guess[0]}'? " if guess else ""
        return ConfigError(
            file=path,
            field=field,
            value=first["input"],
            problem="unknown key",
            fix=f"{hint}remove or rename it; "
            + (f"known keys here: {', '.join(known)}" if known else "see the comments in the shipped file"),
        )
    if loc[-1] == "[key]":  # a table keyed by fixed names (e.g. ecs.services): the name is the typo
        field = toml_path(first["loc"][:-1])
        allowed = re.findall(r"'([^']+)'", str(first.get("ctx", {}).get("expected", "")))
        guess = difflib.get_close_matches(str(first["input"]), allowed, n=1)
        hint = f"did you mean '{guess[0]}'? " if guess else ""
        return ConfigError(
            file=path,
            field=field,
            value=first["input"],
            problem="unknown name",
            fix=f"{hint}use one of {', '.join(allowed)}",
        )
    if kind == "missing":
        return ConfigError(
            file=path,
            field=field,
            value=MISSING,
            problem="required key is missing",
            fix=f"add `{loc[-1]} = ...` to {path.name}",
        )
    kind = EXPECTED.get(first["type"], "a value that satisfies this")
    value = first["input"]
    if first["type"] in ("control_character", "template_syntax"):
        table = field
        field, value, is_key = _offending_entry(field, value, str(first.get("ctx", {}).get("text", "")))
        if is_key:  # the name of an entry (a tag key, a variable's name), not the value it holds
            return ConfigError(
                file=path,
                field=field,
                value=value,
                problem=f"the key {first['msg'].rstrip('.')}",
                fix=f"rename the key in {table}: {RENAMED[first['type']]}",
            )
    return ConfigError(
        file=path,
        field=field or "(file)",
        value=value,
        problem=first["msg"].rstrip("."),
        fix=f"write {kind} for {field or 'the file'} ({describe(model, loc)})",
    )


# What to write instead, by pydantic's error type (a wrong type says which type goes there).
EXPECTED = {
    "string_type": "a quoted string",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "bool_for_number": "a number",
    "string_for_number": "the number without quotes",
    "number_too_large": "a number in the range the comment in the shipped file gives",
    "list_type": "a list, [...]",
    "dict_type": "a table, [name] or { ... }",
    "model_type": "a table, [name] or { ... }",
    "model_attributes_type": "a table, [name] or { ... }",
    "literal_error": "one of those",
    "enum": "one of those",
    "greater_than": "a number in that range",
    "greater_than_equal": "a number in that range",
    "less_than": "a number in that range",
    "less_than_equal": "a number in that range",
    "string_pattern_mismatch": "text of that form",
    "string_too_short": "text of that length",
    "string_too_long": "text of that length",
    "too_short": "that many entries",
    "too_long": "that many entries",
    "image_name": "the image's name, e.g. public.ecr.aws/docker/library/nats",
    "image_digest": "sha256: and the 64 hex digits `docker buildx imagetools inspect` prints",
    "ami_release": 'a release name of that form, or "recommended"',
    "ami_alias": "an alias of that form",
    "control_character": "the value without it",
    "template_syntax": "plain text (CloudFormation syntax is not config)",
}


# What to write instead when the refused text is a key (a tag's, a variable's name).
RENAMED = {
    "control_character": "the same name without that character",
    "template_syntax": "a plain name (CloudFormation syntax is not config)",
}


def _offending_entry(field: str, value: object, text: str) -> tuple[str, object, bool]:
    """In a table or list, the entry that holds `text` (the string refused), so the error names it: its
    path, the refused text, and whether that text is the entry's key rather than its value."""
    if isinstance(value, dict):
        for key, item in value.items():
            if text in (key, item):
                return f"{field}.{toml_path([str(key)])}", item if text == item else key, text != item
    if isinstance(value, list) and text in value:
        return f"{field}[{value.index(text)}]", text, False
    return field, value, False


def toml_path(loc: Sequence[object]) -> str:
    """A dotted key as TOML spells it, the one spelling every error uses (schema and rules alike): a name
    with anything but letters, digits and _ in it (a Sonic version, an instance type, a tag key such as
    aws:team, an empty key) is quoted, with " and \\ escaped, e.g.
    concurrency."sonic-3.5".per_instance."ml.g6e.xlarge"; a list index (an int: TOML keys are strings) in
    brackets, e.g. routes[1], sagemaker.alarms.email[0]."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if path else "") + _toml_key(str(part))
    return path


def _toml_key(part: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_]+", part):
        return part
    return '"' + part.replace("\\", "\\\\").replace('"', '\\"') + '"'


def field_model(model: type[BaseModel], loc: list[str]) -> type[BaseModel] | None:
    current: type[BaseModel] | None = model
    keyed = False  # the last field was a table (or list) of models: this part is a name (index), not a field
    for part in loc:
        if keyed:
            keyed = False
            continue
        if current is None or part not in current.model_fields:
            return None
        annotation = current.model_fields[part].annotation
        keyed = get_origin(annotation) in (dict, list)
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        current = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
    return current


def known_keys(model: type[BaseModel], loc: list[str]) -> list[str]:
    target = field_model(model, loc)
    return sorted(target.model_fields) if target else []


def describe(model: type[BaseModel], loc: list[str]) -> str:
    parent = field_model(model, loc[:-1])
    if parent is None or loc[-1] not in parent.model_fields:
        return "see the comments in the shipped file"
    info = parent.model_fields[loc[-1]]
    default = "required" if info.is_required() else f"default {info.default!r}"
    return f"{default}; {info.description}" if info.description else default
