"""Per-level statistics: one HDR histogram per measure, so that worker processes merge exactly."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram  # type: ignore[import-untyped]

# Histograms hold microseconds (and RTF x 1000) as integers, 3 significant digits, up to one hour.
SCALE = 1000
HIGHEST = 3_600_000_000
SIGNIFICANT_DIGITS = 3
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}
MEASURES = (
    "ttfa_ms",
    "ttfa_audible_ms",
    "service_ttfa_ms",
    "ttfa_last_piece_ms",
    "connect_ms",
    "total_ms",
    "rtf",
    "max_gap_ms",
    "late_ms",
)
# An open-loop request that starts this much after its scheduled time is reported as a late start.
LATE_START_MS = 5.0


def new_histogram() -> Any:
    return HdrHistogram(1, HIGHEST, SIGNIFICANT_DIGITS)


@dataclass
class LevelStats:
    """Counts and histograms for the measured (not warm-up) requests of one load level."""

    requests: int = 0
    ok: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    underruns: int = 0
    requests_with_underruns: int = 0
    late_starts: int = 0
    ignored_events: int = 0
    foreign_messages: int = 0
    histograms: dict[str, Any] = field(default_factory=lambda: {m: new_histogram() for m in MEASURES})
    # How the level ran on the client: the closed loop's ramp-up (the longest of the workers'), and the
    # cycle collector's pauses while measuring (see event_loop.steady_collector).
    ramp_up_s: float | None = None
    gc_collections: int = 0
    gc_total_ms: float = 0.0
    gc_max_ms: float = 0.0

    def add(self, record: dict[str, Any]) -> None:
        self.requests += 1
        if record["ok"]:
            self.ok += 1
        else:
            self.errors[str(record["error"])] += 1
        self.underruns += int(record["underruns"])
        self.requests_with_underruns += record["underruns"] > 0
        late = record.get("late_ms")
        self.late_starts += late is not None and late > LATE_START_MS
        self.ignored_events += int(record.get("ignored_events", 0))
        self.foreign_messages += int(record.get("foreign_messages", 0))
        for measure in MEASURES:
            value = record.get(measure)
            # Latencies of failed requests would mix two populations; they are counted as errors instead.
            if value is None or (not record["ok"] and measure != "late_ms"):
                continue
            self.histograms[measure].record_value(min(HIGHEST, max(0, round(value * SCALE))))

    def encode(self) -> dict[str, Any]:
        """A picklable form for the trip from a worker process to the parent."""
        return {
            "requests": self.requests,
            "ok": self.ok,
            "errors": dict(self.errors),
            "underruns": self.underruns,
            "requests_with_underruns": self.requests_with_underruns,
            "late_starts": self.late_starts,
            "ignored_events": self.ignored_events,
            "foreign_messages": self.foreign_messages,
            "histograms": {m: h.encode() for m, h in self.histograms.items() if h.get_total_count()},
            "ramp_up_s": self.ramp_up_s,
            "gc": (self.gc_collections, self.gc_total_ms, self.gc_max_ms),
        }

    def merge(self, encoded: dict[str, Any]) -> None:
        for name in (
            "requests",
            "ok",
            "underruns",
            "requests_with_underruns",
            "late_starts",
            "ignored_events",
            "foreign_messages",
        ):
            setattr(self, name, getattr(self, name) + int(encoded[name]))
        self.errors.update(encoded["errors"])
        for measure, blob in encoded["histograms"].items():
            self.histograms[measure].decode_and_add(blob)
        if encoded["ramp_up_s"] is not None:
            self.ramp_up_s = max(self.ramp_up_s or 0.0, encoded["ramp_up_s"])
        collections, total_ms, max_ms = encoded["gc"]
        self.gc_collections += collections
        self.gc_total_ms += total_ms
        self.gc_max_ms = max(self.gc_max_ms, max_ms)

    def percentiles(self, measure: str) -> dict[str, float | None]:
        histogram = self.histograms[measure]
        if not histogram.get_total_count():
            return {**dict.fromkeys(PERCENTILES), "max": None}
        values: dict[str, float | None] = {
            key: histogram.get_value_at_percentile(p) / SCALE for key, p in PERCENTILES.items()
        }
        values["max"] = histogram.get_max_value() / SCALE
        return values

    def summary(self, concurrency: int | None, rate: float | None) -> dict[str, Any]:
        return {
            "concurrency": concurrency,
            "rate": rate,
            "requests": self.requests,
            "ok": self.ok,
            "errors": dict(sorted(self.errors.items())),
            "ttfa_ms": self.percentiles("ttfa_ms"),
            "total_ms": self.percentiles("total_ms"),
            "rtf": self.percentiles("rtf"),
            "underruns": self.underruns,
            "requests_with_underruns": self.requests_with_underruns,
            "ttfa_audible_ms": self.percentiles("ttfa_audible_ms"),
            "service_ttfa_ms": self.percentiles("service_ttfa_ms"),
            # An agent's turns: from the last piece of text (0 when audio had already begun).
            "ttfa_last_piece_ms": self.percentiles("ttfa_last_piece_ms"),
            "connect_ms": self.percentiles("connect_ms"),
            "max_gap_ms": self.percentiles("max_gap_ms"),
            "late_ms": self.percentiles("late_ms"),
            "late_starts": self.late_starts,
            "ignored_events": self.ignored_events,
            "foreign_messages": self.foreign_messages,
            "ramp_up_s": None if self.ramp_up_s is None else round(self.ramp_up_s, 3),
            "client_gc": {
                "collections": self.gc_collections,
                "total_ms": round(self.gc_total_ms, 3),
                "max_ms": round(self.gc_max_ms, 3),
            },
        }
