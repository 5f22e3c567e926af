"""The base every config model derives from (`Strict`: no unknown keys, plain finite numbers, no control
characters or CloudFormation syntax in text), the value types the models of several routes share, and the
default environment."""

from __future__ import annotations

import re
import unicodedata
from types import UnionType
from typing import Annotated, Any, ClassVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

# The environment when none is named: the only one that may leave the account out, where TLS, the canary and
# deletion protection are off unless turned on, and Spot instances are allowed.
DEFAULT_ENVIRONMENT = "dev"

Email = Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")]
Percent = Annotated[float, Field(gt=0, le=100)]
Ratio = Annotated[float, Field(gt=0, le=1)]


def _bare(hint: Any) -> Any:
    while get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    return hint


def _takes_a_number(annotation: Any) -> bool:
    """An int or float field (also inside Annotated, Optional or a union), not one that takes a boolean too."""
    bare = _bare
    annotation = bare(annotation)
    options = (
        [bare(o) for o in get_args(annotation)]
        if get_origin(annotation) in (Union, UnionType)
        else [annotation]
    )
    return bool not in options and any(option in (int, float) for option in options)


# CloudFormation takes integer properties as 32-bit signed integers ("Type: Integer" in its resource
# reference); no setting here needs more, and a larger number is a typo.
INT32_MAX = 2**31 - 1
# Text CloudFormation or CDK would read as something else than itself, wherever the string lands in a
# template: a dynamic reference ("you can use a dynamic reference for a secret in any resource property",
# AWS CloudFormation User Guide, "Get values stored in other services using dynamic references"), the
# pseudo parameters and intrinsic functions Fn::Sub and the JSON form spell (${AWS::Region}, Fn::GetAtt),
# and a CDK token's string form (${Token[...]}), which CDK substitutes at synth.
TEMPLATE_SYNTAX = re.compile(r"\{\{resolve:|\$\{AWS::|Fn::|\$\{Token\[", re.IGNORECASE)
_NESTING_CHECKED = 64  # deeper values are refused by their type anyway; do not walk them


def _strings_in(value: Any) -> Any:
    """Every string in `value` (and in the keys of its tables), down to _NESTING_CHECKED levels."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            yield item
        elif depth < _NESTING_CHECKED and isinstance(item, dict):
            stack.extend((part, depth + 1) for pair in item.items() for part in pair)
        elif depth < _NESTING_CHECKED and isinstance(item, list):
            stack.extend((part, depth + 1) for part in item)


def _holds_models(annotation: Any) -> bool:
    """The field's type is, or holds (in a list, a table or a union), a model."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return True
    return any(_holds_models(arg) for arg in get_args(annotation))


def _keys(value: Any) -> list[Any]:
    return list(value) if isinstance(value, dict) else []


# Control and format characters (zero-width ones among them) and line and paragraph separators.
_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _control_character(text: str, allowed: str) -> str | None:
    if text.isprintable():
        return None
    return next((c for c in text if unicodedata.category(c) in _INVISIBLE and c not in allowed), None)


class Strict(BaseModel):
    """Unknown keys are typos: refuse them. Numbers are finite (TOML's `inf` and `nan` are refused) and
    within CloudFormation's 32-bit integers, a boolean is not a number (pydantic would take `true` for 1),
    and neither is a quoted string (`min_instances = "2"`: strict mode, so a number in a table or list is
    not converted either, and a string number never slips past the int32 check, which runs after the
    field's own range). No string holds a control character (but a tab or newline in the fields listed in
    `_multiline`: a container's shell command may have them) or CloudFormation's own syntax."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, strict=True)
    _multiline: ClassVar[frozenset[str]] = frozenset()

    @field_validator("*", mode="before")
    @classmethod
    def _plain_values(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and _takes_a_number(field.annotation):
            if isinstance(value, bool):
                raise PydanticCustomError(
                    "bool_for_number", "a boolean where a number is needed (true and false are not 1 and 0)"
                )
            if isinstance(value, str):
                raise PydanticCustomError(
                    "string_for_number",
                    "a quoted string where a number is needed (in TOML a quoted number is text)",
                )
        # A model checks its own fields, so the error names the field in it (an unknown key is refused as
        # one); of a table of models, only the names are checked here.
        checked = value
        if field is not None and _holds_models(field.annotation):
            checked = _keys(value) if get_origin(_bare(field.annotation)) is dict else []
        # A shell command may hold a tab or a newline (in its text, not in a variable's name).
        multiline = info.field_name in cls._multiline
        for text in _strings_in(checked):
            allowed = "\t\n" if multiline and not (isinstance(value, dict) and text in value) else ""
            bad = _control_character(text, allowed)
            if bad is not None:
                raise PydanticCustomError(
                    "control_character",
                    "holds the control character {character} (a pasted newline, tab or terminal escape?)",
                    {"character": repr(bad), "text": text},
                )
            syntax = TEMPLATE_SYNTAX.search(text)
            if syntax is not None:
                raise PydanticCustomError(
                    "template_syntax",
                    "holds {syntax}, which CloudFormation or CDK would resolve instead of keeping as text",
                    {"syntax": repr(syntax.group()), "text": text},
                )
        return value

    @field_validator("*", mode="after")
    @classmethod
    def _not_too_large(cls, value: Any, info: ValidationInfo) -> Any:
        """After the field's own range (`Field(le=...)`), so a field that has one says so; this is for the
        fields that have none (`1e308` in a share is "at most 1", not CloudFormation's integers)."""
        field = cls.model_fields.get(info.field_name or "")
        if field is None or not _takes_a_number(field.annotation) or isinstance(value, bool):
            return value
        if isinstance(value, int | float) and abs(value) > INT32_MAX:
            limit = "CloudFormation's integers stop at" if isinstance(value, int) else "none goes past"
            raise PydanticCustomError(
                "number_too_large", f"beyond what any setting here takes ({limit} {INT32_MAX})"
            )
        return value
