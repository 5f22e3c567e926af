"""Draw a stack's CloudWatch dashboard offline, from its own JSON and a probe run's samples.

    python -m sonic_deploy.dashboard_render cdk.out/SonicEcs.template.json probe-runs/X/samples.jsonl -o out.png
    python -m sonic_deploy.dashboard_render cdk.out/SonicSageMaker.template.json --agent agent.jsonl -o out.png

The body is the synthesized DashboardBody (its Fn::Join resolved, references shown as <LogicalId>); every
widget is drawn at its own x, y, width and height on the 24-column grid. What a probe run measures fills the
widgets that graph it: the canary's first audio (p50/p95 per time bin) and its succeeded, failed and throttled
counts, and on SageMaker's streams widget the client's requests in flight (total, from each sample's start and
end; not per instance, so the widget's per-instance line is left out). Every other line or widget says "no data
offline: <metric>" (a Logs Insights widget: "no data offline: Logs Insights query over <log groups>"), as does
a line with no value in the run: nothing here is invented. With `--agent`, the lines an agent's Telemetry
wrote (docs/client.md, "Telemetry") fill the agent row: each time bin's percentiles and sums of what the lines
carry, the error-kind search as one line per kind found, the error share as its expression computes it. No
aws_cdk: it reads files only.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sonic_deploy.arguments import OneLineParser, output_file
from sonic_deploy.config.errors import ConfigError, one_line
from sonic_deploy.dashboard_inputs import TEMPLATE_FIX, dashboard_bodies, template_dashboards
from sonic_deploy.dashboard_inputs import resolve as resolve
from sonic_deploy.dashboard_series import (
    STREAM_METRICS,
    AgentRecord,
    Sample,
    agent_error_kinds,
    lines,
    load_agent,
    load_samples,
    log_sources,
    ratio_series,
    reads_agent,
    series,
)

GRID_COLUMNS = 24
STREAM_LABEL = "client requests in flight (total, probe run)"


def dashboards(template: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Logical ID -> dashboard body, for every AWS::CloudWatch::Dashboard in a template already read."""
    return template_dashboards(Path("(template)"), dict(template))


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


def render(
    body: dict[str, Any],
    samples: Sequence[Sample],
    out: Path,
    *,
    title: str = "",
    agent: Sequence[AgentRecord] = (),
) -> list[str]:
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
        drawn.append(_draw(axes, widget, samples, agent))
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


def _draw(axes: Any, widget: dict[str, Any], samples: Sequence[Sample], agent: Sequence[AgentRecord]) -> str:
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
    every = lines(properties)
    by_id = {line.id: line for line in every if line.id}
    shown = [line for line in every if line.visible]
    missing: list[str] = []
    plotted: list[str] = []
    sources: set[str] = set()
    streams = False
    for line in shown:
        source = "agent log" if reads_agent(line, by_id) else "probe run"
        kinds = agent_error_kinds(line, agent)
        for kind, found in kinds:
            axes.plot(*found, marker=".", label=f"{kind} ({source})")
            plotted.append(kind)
        drawn = None if kinds else ratio_series(line, by_id, samples, agent) or series(line, samples, agent)
        if not kinds and (drawn is None or not drawn[0]):
            missing.append(line.offline_name)
            continue
        sources.add(source)
        if drawn is None:
            continue
        if line.name in STREAM_METRICS:
            # The client's total, not the metric's per-instance or per-worker figure: labelled as what it is.
            streams = True
            axes.plot(*drawn, marker=".", label=STREAM_LABEL)
            plotted.append(STREAM_LABEL)
        else:
            axes.plot(*drawn, marker=".", label=f"{line.label} ({source})")
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
        "x: seconds into the "
        + (" and the ".join(sorted(sources)) or "probe run")
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
    parser.add_argument("samples", type=Path, nargs="?", help="a probe run's samples.jsonl")
    parser.add_argument(
        "--agent",
        type=Path,
        help="the lines an agent's Telemetry wrote (embedded metric format), for its row",
    )
    parser.add_argument("-o", "--out", type=png_file, default=Path("dashboard.png"), help="a .png file")
    parser.add_argument("--title", default=None, help="default: the dashboard's logical ID and the template")
    args = parser.parse_args(argv)
    if args.samples is None and args.agent is None:
        parser.error("nothing to draw from. Fix: give a probe run's samples.jsonl, --agent FILE, or both")
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
        samples = load_samples(args.samples) if args.samples is not None else []
        agent = load_agent(args.agent) if args.agent is not None else []
        title = args.title if args.title is not None else f"{logical_id} ({args.template.name}), offline"
        drawn = render(body, samples, args.out, title=title, agent=agent)
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
