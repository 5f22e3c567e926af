"""The outputs of one probe run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class ProbeRun:
    def __init__(self, out: Path, exit_code: int) -> None:
        self.out, self.exit_code = out, exit_code
        self.summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
        lines = (out / "samples.jsonl").read_text().splitlines()
        self.samples: list[dict[str, Any]] = [json.loads(line) for line in lines]

    @property
    def measured(self) -> list[dict[str, Any]]:
        return [s for s in self.samples if not s["warmup"]]

    def level(self, index: int = 0) -> dict[str, Any]:
        level: dict[str, Any] = self.summary["levels"][index]
        return level
