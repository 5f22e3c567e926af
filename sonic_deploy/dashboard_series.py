"""What a dashboard widget's lines draw offline (sonic_deploy/dashboard_render.py): each line of a widget's
metric array, and its series per time bin from a probe run's samples or from an agent's telemetry lines, as
CloudWatch's statistic would compute it from the same data. No aws_cdk, no matplotlib."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sonic_deploy.client import metric_names as agent_names
from sonic_deploy.config.errors import ConfigError
from sonic_deploy.dashboard_inputs import AGENT_FIX, SAMPLES_FIX, agent_records, sample_records
from sonic_deploy.probe.publish_metrics import throttled

CANARY_NAMESPACE = "SonicDeploy/Canary"  # sonic_deploy/probe/canary_metrics.py
# Metrics that count streams in flight: the ECS workers' load, SageMaker's concurrent requests. Drawn offline as
# what the probe measures instead, the client's requests in flight in total, under this label.
STREAM_METRICS = ("inferno_worker_load", "ConcurrentRequestsPerModel")


@dataclass(frozen=True)
class Line:
    """One line of a metric widget: a metric (namespace, name, statistic) or an expression."""

    namespace: str
    name: str
    stat: str
    label: str
    visible: bool
    id: str = ""  # what an expression in the same widget calls it
    dimensions: tuple[tuple[str, str], ...] = ()

    @property
    def offline_name(self) -> str:
        return self.name if self.namespace == "expression" else f"{self.namespace} {self.name} {self.stat}"


def lines(properties: dict[str, Any]) -> list[Line]:
    """The widget's metric array as lines ("." repeats the entry before, as CloudWatch's JSON allows)."""
    found: list[Line] = []
    previous: list[Any] = []
    for entry in properties.get("metrics", []):
        options = entry[-1] if entry and isinstance(entry[-1], dict) else {}
        fields = [f for f in entry if not isinstance(f, dict)]
        if "expression" in options:
            found.append(
                Line(
                    "expression",
                    options["expression"],
                    "",
                    str(options.get("label", options["expression"])),
                    True,
                )
            )
            continue
        fields = [previous[i] if f == "." and i < len(previous) else f for i, f in enumerate(fields)]
        previous = fields
        namespace, name = fields[0], fields[1]
        stat = options.get("stat", properties.get("stat", "Average"))
        label = options.get("label", name)
        pairs = tuple(zip(fields[2::2], fields[3::2], strict=False))
        found.append(
            Line(namespace, name, stat, label, options.get("visible", True), options.get("id", ""), pairs)
        )
    return found


def log_sources(properties: dict[str, Any]) -> list[str]:
    """The log groups a log widget's query reads (its `SOURCE '...'` clauses), or "no log group"."""
    return re.findall(r"SOURCE '([^']*)'", str(properties.get("query", ""))) or ["no log group"]


@dataclass(frozen=True)
class Sample:
    start: float
    end: float
    ok: bool
    throttled: bool
    ttfa_ms: float | None


def load_samples(path: Path) -> list[Sample]:
    """The measured requests of a probe run's samples.jsonl (warm-ups left out), times from the run's start."""
    records = [r for r in sample_records(path) if not r.get("warmup")]
    if not records:
        raise ConfigError(
            file=path, field="(file)", value=str(path), problem="no measured requests", fix=SAMPLES_FIX
        )
    samples = []
    for r in records:
        end = float(r["time"])
        start = end - (r["total_ms"] or 0.0) / 1000
        ok = bool(r["ok"])
        # As the canary counts Throttled (publish_metrics.throttled): failed requests refused for capacity.
        samples.append(Sample(start, end, ok, not ok and throttled(str(r.get("error"))), r.get("ttfa_ms")))
    origin = min(s.start for s in samples)
    return [Sample(s.start - origin, s.end - origin, s.ok, s.throttled, s.ttfa_ms) for s in samples]


@dataclass(frozen=True)
class AgentRecord:
    """One telemetry line of an agent: when (s from the log's first line), its metrics, its dimensions' values
    (the error kind's too, on a failed utterance's line)."""

    at: float
    values: Mapping[str, float]
    dimensions: Mapping[str, str]


def load_agent(path: Path) -> list[AgentRecord]:
    """An agent's telemetry lines, times from the first line's."""
    records = agent_records(path)
    if not records:
        raise ConfigError(
            file=path, field="(file)", value=str(path), problem="no telemetry lines", fix=AGENT_FIX
        )
    origin = min(r["_aws"]["Timestamp"] for r in records)
    return [
        AgentRecord(
            (r["_aws"]["Timestamp"] - origin) / 1000,
            {m["Name"]: r[m["Name"]] for d in r["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]},
            {
                name: str(r[name])
                for name in (agent_names.ENVIRONMENT, agent_names.ROUTE, agent_names.ERROR_KIND)
                if name in r
            },
        )
        for r in records
    ]


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest rank, as the probe's progress line shows it."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def bins(samples: Sequence[Sample], count: int = 24) -> list[tuple[float, float]]:
    """`count` windows of at least 1 s from the run's start to its last end; a sample ending at a window's
    upper bound falls in the next one, except at the last window, which includes its upper bound."""
    return _windows(max(s.end for s in samples), count) if samples else []


def _windows(span: float, count: int = 24) -> list[tuple[float, float]]:
    width = max(span / count, 1.0)
    return [(i * width, (i + 1) * width) for i in range(max(1, math.ceil(span / width)))]


def agent_series(line: Line, records: Sequence[AgentRecord]) -> tuple[list[float], list[float]] | None:
    """(bin midpoints in s, values) of an agent metric: each bin's percentile, sum or average of the lines
    that carry it with the line's dimension values, as CloudWatch's statistic would; none, no point."""
    if line.namespace != agent_names.NAMESPACE or not records:
        return None
    percent = re.fullmatch(r"p(\d+(?:\.\d+)?)", line.stat)
    if percent is None and line.stat not in ("Sum", "Average"):
        return None  # drawn as "no data offline", not as another statistic under its label
    windows = _windows(max(r.at for r in records))
    xs, ys = [], []
    for index, (lo, hi) in enumerate(windows):
        last = index == len(windows) - 1
        values = [
            r.values[line.name]
            for r in records
            if line.name in r.values
            and (lo <= r.at < hi or (last and r.at == hi))
            and all(r.dimensions.get(name) == value for name, value in line.dimensions)
        ]
        if values:
            xs.append((lo + hi) / 2)
            if percent is not None:
                ys.append(percentile(values, float(percent.group(1))))
            else:
                ys.append(sum(values) if line.stat == "Sum" else sum(values) / len(values))
    return xs, ys


def agent_error_kinds(
    line: Line, records: Sequence[AgentRecord]
) -> list[tuple[str, tuple[list[float], list[float]]]]:
    """The agent row's SEARCH over errors by kind, as CloudWatch would return it: one line per kind found."""
    if (
        line.namespace != "expression"
        or agent_names.ERROR_KIND not in line.name
        or "SEARCH(" not in line.name
    ):
        return []
    # The search's own filter (Environment="dev" Route="ecs"), each found kind a line of its own.
    wanted = tuple((k, v) for k, v in re.findall(r'(\w+)=\\*"([^"\\]*)\\*"', line.name) if k != "MetricName")
    kind_of = agent_names.ERROR_KIND
    kinds = sorted({r.dimensions[kind_of] for r in records if kind_of in r.dimensions})
    found = []
    for kind in kinds:
        errors = Line(
            agent_names.NAMESPACE, agent_names.ERRORS, "Sum", kind, True, "", (*wanted, (kind_of, kind))
        )
        series = agent_series(errors, records)
        if series and series[0]:
            found.append((kind, series))
    return found


def ratio_series(
    line: Line, by_id: Mapping[str, Line], samples: Sequence[Sample], agent: Sequence[AgentRecord]
) -> tuple[list[float], list[float]] | None:
    """An expression `100 * a / b` over two metrics of its widget (a share in %), where both are known."""
    match = (
        re.fullmatch(r"\s*100\s*\*\s*(\w+)\s*/\s*(\w+)\s*", line.name)
        if line.namespace == "expression"
        else None
    )
    if match is None or not {match.group(1), match.group(2)} <= set(by_id):
        return None
    top, bottom = (series(by_id[i], samples, agent) for i in match.groups())
    if not top or not bottom:
        return None
    shares = {
        x: 100 * dict(zip(*top, strict=True)).get(x, 0.0) / y for x, y in zip(*bottom, strict=True) if y
    }
    return list(shares), list(shares.values())


def reads_agent(line: Line, by_id: Mapping[str, Line]) -> bool:
    """A line of the agent's metrics, or an expression over them."""
    if line.namespace == "expression":
        return agent_names.NAMESPACE in line.name or any(
            by_id[i].namespace == agent_names.NAMESPACE for i in re.findall(r"\w+", line.name) if i in by_id
        )
    return line.namespace == agent_names.NAMESPACE


def series(
    line: Line, samples: Sequence[Sample], agent: Sequence[AgentRecord]
) -> tuple[list[float], list[float]] | None:
    return (
        agent_series(line, agent)
        if line.namespace == agent_names.NAMESPACE
        else offline_series(line, samples)
    )


def offline_series(line: Line, samples: Sequence[Sample]) -> tuple[list[float], list[float]] | None:
    """(bin midpoints in s, values) for a line a probe run measures, else None. A bin without a value (no
    successful request for a TTFA percentile) has no point."""
    windows = bins(samples)
    xs, ys = [], []
    for index, (lo, hi) in enumerate(windows):
        last = index == len(windows) - 1
        ended = [s for s in samples if lo <= s.end < hi or (last and s.end == hi)]
        value: float | None = None
        if line.namespace == CANARY_NAMESPACE and line.name == "TimeToFirstAudio":
            ttfa = [s.ttfa_ms for s in ended if s.ok and s.ttfa_ms is not None]
            match = re.fullmatch(r"p(\d+(?:\.\d+)?)", line.stat)
            if match is None:
                return None
            value = percentile(ttfa, float(match.group(1))) if ttfa else None
        elif line.namespace == CANARY_NAMESPACE and line.name in (
            "Succeeded",
            "Failed",
            "Throttled",
            "Requests",
        ):
            value = float(
                sum(
                    1
                    for s in ended
                    if {"Succeeded": s.ok, "Failed": not s.ok, "Throttled": s.throttled, "Requests": True}[
                        line.name
                    ]
                )
            )
        elif line.name in STREAM_METRICS:
            # Time-weighted requests in flight over the bin.
            value = sum(max(0.0, min(hi, s.end) - max(lo, s.start)) for s in samples) / (hi - lo)
        else:
            return None
        if value is not None:
            xs.append((lo + hi) / 2)
            ys.append(value)
    return xs, ys
