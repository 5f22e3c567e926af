"""The one error a user sees for bad configuration."""

from __future__ import annotations

import reprlib
from pathlib import Path
from typing import NoReturn, Protocol


# A value is shown, not dumped: a 5,000-character string or a table nested 3,000 deep is cut short (and a
# nested value cannot exhaust the recursion limit on its way to the screen).
class _InOrder(reprlib.Repr):
    """reprlib, but a table's keys in the file's order (reprlib sorts them)."""

    def repr_dict(self, x: dict[object, object], level: int) -> str:
        if not x:
            return "{}"
        if level <= 0:
            return "{...}"
        shown = [
            f"{self.repr1(k, level - 1)}: {self.repr1(v, level - 1)}"
            for k, v in list(x.items())[: self.maxdict]
        ]
        return "{" + ", ".join(shown) + (", ..." if len(x) > self.maxdict else "") + "}"


_SHOWN = _InOrder()
_SHOWN.maxstring = 160
_SHOWN.maxother = 160
_SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxdict = _SHOWN.maxset = 8
_SHOWN.maxlevel = 4


class ConfigError(Exception):
    """Bad configuration, reported as: which file, which field, what value, what was wrong, what to write.

    Its text is one line whatever went in: a newline, a control character or a line separator in the file
    name, the field (a table key can hold one), the value, the problem or the fix is shown escaped."""

    def __init__(self, *, file: Path | str, field: str, value: object, problem: str, fix: str) -> None:
        self.file = str(file)
        self.field = field
        self.value = value
        self.problem = problem
        self.fix = fix
        super().__init__(str(self))

    def __str__(self) -> str:
        shown = "(missing)" if self.value is _MISSING else show(self.value)
        parts = (one_line(self.file), one_line(self.field), shown, one_line(self.problem), one_line(self.fix))
        return "{}: {} = {}: {}. Fix: {}".format(*parts)


def show(value: object) -> str:
    """A value as the error prints it: repr-like, escaped, at most a few hundred characters."""
    try:
        return one_line(_SHOWN.repr(value))
    except RecursionError:
        return "(too deeply nested to show)"


def one_line(text: str) -> str:
    """`text` with every character that is not printable (newlines, tabs, escape sequences, U+2028 and the
    like) written as its Python escape, so the message stays one line on any terminal or log."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class _Missing:
    def __repr__(self) -> str:
        return "(missing)"


_MISSING = _Missing()
MISSING: object = _MISSING
"""Marker for a value the file does not have."""


class Fail(Protocol):
    """How a rule reports what is wrong: the field, its value, the problem and the fix (the caller adds
    the file and raises the ConfigError)."""

    def __call__(self, field: str, value: object, problem: str, fix: str) -> NoReturn: ...
