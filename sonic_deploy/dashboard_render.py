"""Draw a stack's CloudWatch dashboard offline, from its own JSON and a probe run's samples.

    python -m sonic_deploy.dashboard_render cdk.out/SonicEcs.template.json probe-runs/X/samples.jsonl -o out.png

The body is the synthesized DashboardBody (its Fn::Join resolved, references shown as <LogicalId>); every
widget is drawn at its own x, y, width and height on the 24-column grid. What a probe run measures fills the
widgets that graph it: the canary's first audio (p50/p95 per time bin) and its succeeded, failed and throttled
counts, and on SageMaker's streams widget the client's requests in flight (total, from each sample's start and
end; not per instance, so the widget's per-instance line is left out). Every other line or widget says "no data
offline: <metric>" (a Logs Insights widget: "no data offline: Logs Insights query over <log groups>"), as does
a line with no value in the run: nothing here is invented. No aws_cdk: it reads
files only.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sonic_deploy.arguments import OneLineParser, output_file
from sonic_deploy.config.errors import ConfigError, one_line
from sonic_deploy.dashboard_inputs import (
    SAMPLES_FIX,
    TEMPLATE_FIX,
    dashboard_bodies,
    sample_records,
    template_dashboards,
)
from sonic_deploy.dashboard_inputs import resolve as resolve
from sonic_deploy.probe.publish_metrics import throttled

GRID_COLUMNS = 24
CANARY_NAMESPACE = "SonicDeploy/Canary"  # sonic_deploy/probe/canary_metrics.py
# Metrics that count streams in flight: the ECS workers' load, SageMaker's concurrent requests. Drawn offline as
# what the probe measures instead, the client's requests in flight in total, under this label.
STREAM_METRICS = ("inferno_worker_load", "ConcurrentRequestsPerModel")
STREAM_LABEL = "client requests in flight (total, probe run)"


def dashboards(template: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Logical ID -> dashboard body, for every AWS::CloudWatch::Dashboard in a template already read."""
    return template_dashboards(Path("(template)"), dict(template))


@dataclass(frozen=True)
class Line:
    """One line of a metric widget: a metric (namespace, name, statistic) or an expression."""

    namespace: str
    name: str
    stat: str
    label: str
    visible: bool

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
        found.append(Line(namespace, name, stat, label, options.get("visible", True)))
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


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest rank, as the probe's progress line shows it."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def bins(samples: Sequence[Sample], count: int = 24) -> list[tuple[float, float]]:
    """`count` windows of at least 1 s from the run's start to its last end; a sample ending at a window's
    upper bound falls in the next one, except at the last window, which includes its upper bound."""
    if not samples:
        return []
    span = max(s.end for s in samples)
    width = max(span / count, 1.0)
    return [(i * width, (i + 1) * width) for i in range(max(1, math.ceil(span / width)))]


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


def _markdown_text(markdown: str, width: int) -> str:
    plain = re.sub(r"[`*#]", "", markdown)
    return "\n".join(
        textwrap.fill(paragraph.strip(), width) for paragraph in plain.split("\n") if paragraph.strip()
    )


def _layout(widget: dict[str, Any], index: int) -> tuple[int, int, int, int]:
    """The widget's x, y, width and height; a one-line error naming the widget and the field if one is missing."""
    missing = [field for field in ("x", "y", "width", "height") if not isinstance(widget.get(field), int)]
    if missing:
        title = widget.get("properties", {}).get("title") or widget.get("type", "?")
        raise ValueError(
            f"widget {index} ({title}): no {', '.join(missing)}; the renderer draws a synthesized body, in "
            "which CDK places every widget"
        )
    return widget["x"], widget["y"], widget["width"], widget["height"]


def render(body: dict[str, Any], samples: Sequence[Sample], out: Path, *, title: str = "") -> list[str]:
    """Draw every widget of `body` into `out` (PNG); returns, per widget, what was drawn (for tests)."""
    widgets = body.get("widgets") or []
    if not widgets:
        raise ValueError("the dashboard body has no widgets: nothing to draw")
    layout = [_layout(widget, index) for index, widget in enumerate(widgets)]

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = max(y + h for _, y, _, h in layout)
    figure = plt.figure(figsize=(22, rows * 0.62 + 0.6))
    if title:
        figure.suptitle(title, fontsize=13, x=0.01, ha="left")
    top = 1 - 0.6 / (rows * 0.62 + 0.6)
    drawn = []
    for widget, (x, y, w, h) in zip(widgets, layout, strict=True):
        # Inset within the cell so titles and tick labels of neighbours do not overlap.
        left = x / GRID_COLUMNS + 0.028
        bottom = top * (1 - (y + h) / rows) + 0.05
        axes = figure.add_axes((left, bottom, w / GRID_COLUMNS - 0.038, top * h / rows - 0.1))
        drawn.append(_draw(axes, widget, samples))
    figure.savefig(out, dpi=90, format="png")
    plt.close(figure)
    return drawn


def _empty(axes: Any, title: str, missing: Iterable[str]) -> str:
    text = "no data offline: " + "; ".join(missing)
    axes.set_title(title, fontsize=10, loc="left")
    axes.set_xticks([])
    axes.set_yticks([])
    axes.text(
        0.5,
        0.5,
        textwrap.fill(text, 48),
        ha="center",
        va="center",
        fontsize=9,
        color="#666666",
        transform=axes.transAxes,
    )
    return f"{title}: {text}"


def _draw(axes: Any, widget: dict[str, Any], samples: Sequence[Sample]) -> str:
    properties = widget.get("properties", {})
    title = properties.get("title", "")
    if widget["type"] == "text":
        axes.axis("off")
        text = _markdown_text(properties.get("markdown", ""), 12 * widget["width"])
        axes.text(0, 1, text, va="top", ha="left", fontsize=9, transform=axes.transAxes)
        return f"text: {text}"
    if widget["type"] == "alarm":
        return _empty(axes, title, [f"alarm states ({len(properties.get('alarms', []))} alarms)"])
    if widget["type"] == "log":
        # A Logs Insights query runs against CloudWatch Logs; a probe run has no log lines to show.
        return _empty(
            axes, title or "log", [f"Logs Insights query over {', '.join(log_sources(properties))}"]
        )
    if widget["type"] != "metric":
        return _empty(axes, title or widget["type"], [f"{widget['type']} widget"])
    shown = [line for line in lines(properties) if line.visible]
    missing, plotted = [], []
    streams = False
    for line in shown:
        series = offline_series(line, samples)
        if series is None or not series[0]:
            missing.append(line.offline_name)
            continue
        if line.name in STREAM_METRICS:
            # The client's total, not the metric's per-instance or per-worker figure: labelled as what it is.
            streams = True
            axes.plot(*series, marker=".", label=STREAM_LABEL)
            plotted.append(STREAM_LABEL)
        else:
            axes.plot(*series, marker=".", label=f"{line.label} (probe run)")
            plotted.append(line.label)
    if not plotted:
        return _empty(axes, title, missing)
    # A per-instance line (capacity per instance) does not belong over a total.
    annotations = [] if streams else properties.get("annotations", {}).get("horizontal", [])
    for annotation in annotations:
        axes.axhline(annotation["value"], color="#d62728", linestyle="--", linewidth=1)
        axes.annotate(
            annotation.get("label", ""),
            (0.99, annotation["value"]),
            xycoords=("axes fraction", "data"),
            fontsize=8,
            color="#d62728",
            va="bottom",
            ha="right",
        )
    axes.set_title(title, fontsize=10, loc="left")
    axes.set_ylim(0, axes.get_ylim()[1] * 1.3)  # room for the legend above the lines
    axes.tick_params(labelsize=8)
    axes.legend(fontsize=7, loc="upper left")
    # Under the axis, wrapped to the widget's width, so it never covers a line.
    left_out = properties.get("annotations", {}).get("horizontal", []) if streams else []
    footnote = (
        "x: seconds into the probe run"
        + ("; no data offline: " + "; ".join(missing) if missing else "")
        + (
            "; not drawn over a total: " + "; ".join(a.get("label", str(a["value"])) for a in left_out)
            if left_out
            else ""
        )
    )
    axes.text(
        0,
        -0.1,
        textwrap.fill(footnote, 10 * widget["width"]),
        ha="left",
        va="top",
        fontsize=7,
        color="#666666",
        transform=axes.transAxes,
    )
    return f"{title}: drew {', '.join(plotted)}" + (
        f"; no data offline: {'; '.join(missing)}" if missing else ""
    )


PROG = "python -m sonic_deploy.dashboard_render"


def png_file(given: str) -> Path:
    """-o: a .png file to write (a folder is refused: matplotlib would write FOLDER.png beside it)."""
    path = output_file("the dashboard picture")(given)
    if path.suffix.lower() != ".png":
        raise argparse.ArgumentTypeError(
            f"{one_line(repr(given))}: not a .png file name. Fix: name the picture FILE.png"
        )
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument(
        "template", type=Path, help="a synthesized template, e.g. cdk.out/SonicEcs.template.json"
    )
    parser.add_argument("samples", type=Path, help="a probe run's samples.jsonl")
    parser.add_argument("-o", "--out", type=png_file, default=Path("dashboard.png"), help="a .png file")
    parser.add_argument("--title", default=None, help="default: the dashboard's logical ID and the template")
    args = parser.parse_args(argv)
    try:
        found = dashboard_bodies(args.template)
        if len(found) != 1:
            raise ConfigError(
                file=args.template,
                field="Resources",
                value=f"({len(found)} dashboards)",
                problem="not one AWS::CloudWatch::Dashboard",
                fix=TEMPLATE_FIX,
            )
        ((logical_id, body),) = found.items()
        samples = load_samples(args.samples)
        title = args.title if args.title is not None else f"{logical_id} ({args.template.name}), offline"
        drawn = render(body, samples, args.out, title=title)
    except ConfigError as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # the picture cannot be written (its folder went away, a full disk)
        print(
            f"{PROG}: -o {one_line(repr(str(args.out)))}: cannot write it ({error.strerror or error}). "
            "Fix: give a .png path in a folder you can write",
            file=sys.stderr,
        )
        return 2
    for line in drawn:
        print(line)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
