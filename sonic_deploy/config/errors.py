"""The one error a user sees for bad configuration."""

from __future__ import annotations

from pathlib import Path


class ConfigError(Exception):
    """Bad configuration, reported as: which file, which field, what value, what was wrong, what to write."""

    def __init__(self, *, file: Path | str, field: str, value: object, problem: str, fix: str) -> None:
        self.file = str(file)
        self.field = field
        self.value = value
        self.problem = problem
        self.fix = fix
        super().__init__(str(self))

    def __str__(self) -> str:
        shown = "(missing)" if self.value is _MISSING else repr(self.value)
        return f"{self.file}: {self.field} = {shown}: {self.problem}. Fix: {self.fix}"


class _Missing:
    def __repr__(self) -> str:
        return "(missing)"


_MISSING = _Missing()
MISSING: object = _MISSING
"""Marker for a value the file does not have."""
