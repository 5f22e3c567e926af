"""What a run leaves behind: samples.jsonl (one line per request, flushed at once), summary.json, progress."""

from __future__ import annotations

import datetime
import json
import os
import platform
import socket
import sys
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from sonic_deploy import __version__
from sonic_deploy.probe.level import Level
from sonic_deploy.probe.stats import LevelStats

if TYPE_CHECKING:
    from sonic_deploy.probe.capacity_search import SloSearch

SAMPLES = "samples.jsonl"
SUMMARY = "summary.json"
REPORT = "report.png"


def default_out_dir(route: str) -> Path:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    return Path("probe-runs") / f"{route}-{stamp}"


def client_facts() -> dict[str, Any]:
    return {
        "host": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


class Progress:
    """A one-line live display: requests done, errors, rolling p50/p95 of TTFA over the last 200."""

    WINDOW = 200

    def __init__(self, stream: TextIO | None, every_s: float = 0.5) -> None:
        self.stream, self.every_s = stream, every_s
        self.done = self.errors = 0
        self.label = ""
        self.expected: int | None = None
        self._recent: deque[float] = deque(maxlen=self.WINDOW)
        self._shown_at = 0.0

    def begin(self, label: str, expected: int | None) -> None:
        self.label, self.expected, self.done, self.errors = label, expected, 0, 0
        self._recent.clear()

    def add(self, record: dict[str, Any]) -> None:
        if record["warmup"]:
            return
        self.done += 1
        self.errors += not record["ok"]
        if record["ok"] and record["ttfa_ms"] is not None:
            self._recent.append(record["ttfa_ms"])
        if time.monotonic() - self._shown_at >= self.every_s:
            self.show()

    def line(self) -> str:
        of = f"/{self.expected}" if self.expected else ""
        text = f"{self.label}: {self.done}{of} done, {self.errors} errors"
        if self._recent:
            ordered = sorted(self._recent)
            p50, p95 = ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
            text += f", TTFA p50 {p50:.1f} ms p95 {p95:.1f} ms (last {len(ordered)})"
        return text

    def show(self, final: bool = False) -> None:
        self._shown_at = time.monotonic()
        if self.stream is None:
            return
        ending = "\n" if final or not self.stream.isatty() else ""
        self.stream.write(("\r\x1b[K" if self.stream.isatty() else "") + self.line() + ending)
        self.stream.flush()


class RunOutput:
    """Receives every record as it completes and every level's merged statistics."""

    def __init__(
        self, out_dir: Path, target: dict[str, Any], progress: Progress, slo: SloSearch | None = None
    ) -> None:
        """`slo`: the capacity search choosing the levels, whose state the summary carries as `slo`."""
        out_dir.mkdir(parents=True, exist_ok=True)
        if (out_dir / SAMPLES).exists():
            raise FileExistsError(f"{out_dir} already holds a run ({SAMPLES}): choose another --out")
        self.out_dir, self.target, self.progress, self.slo = out_dir, target, progress, slo
        self.started_at = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        self.levels: list[dict[str, Any]] = []
        self.samples_written = 0
        # Rebuilt from the records as they arrive, for a level that is interrupted before it reports.
        self._current: tuple[Level, LevelStats] | None = None
        self._samples = (out_dir / SAMPLES).open("x", encoding="utf-8")

    def begin_level(self, level: Level) -> None:
        label = f"c={level.concurrency}" if level.rate is None else f"rate={level.rate}/s"
        expected = level.requests if level.rate is None else round(level.rate * level.duration_s)
        self.progress.begin(label, expected)
        self._current = (level, LevelStats())

    def record(self, record: dict[str, Any]) -> None:
        self._samples.write(json.dumps(record) + "\n")
        self._samples.flush()
        self.samples_written += 1
        self.progress.add(record)
        if self._current is not None and not record["warmup"]:
            self._current[1].add(record)

    def level_done(self, level: Level, stats: LevelStats) -> None:
        self.progress.show(final=True)
        self.levels.append(stats.summary(level.concurrency, level.rate))
        self._current = None
        self.write_summary()

    def interrupted(self) -> None:
        """Ctrl-C: summarise the level in progress from the samples it completed, marked as interrupted."""
        if self._current is not None and self._current[1].requests:
            level, stats = self._current
            self.levels.append({**stats.summary(level.concurrency, level.rate), "interrupted": True})
        self._current = None

    def summary(self) -> dict[str, Any]:
        summary = {
            "target": self.target,
            "levels": self.levels,
            "client": client_facts(),
            "started_at": self.started_at,
            "version": __version__,
        }
        return summary if self.slo is None else {**summary, "slo": self.slo.as_json()}

    def write_summary(self) -> None:
        path = self.out_dir / SUMMARY
        partial = path.with_suffix(".json.tmp")
        partial.write_text(json.dumps(self.summary(), indent=2) + "\n", encoding="utf-8")
        partial.replace(path)

    def close(self) -> None:
        self._samples.close()


def read_summary(out_dir: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((out_dir / SUMMARY).read_text(encoding="utf-8"))
    return summary


def read_samples(out_dir: Path) -> list[dict[str, Any]]:
    path = out_dir / SAMPLES
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [json.loads(line) for line in lines if line.strip()]


def stderr_or_none(quiet: bool) -> TextIO | None:
    return None if quiet else sys.stderr
