"""report.png (TTFA percentiles against load, and a CDF per level), text tables, and `compare`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from sonic_deploy.arguments import write_output
from sonic_deploy.config.errors import one_line
from sonic_deploy.probe.capacity_search import verdict
from sonic_deploy.probe.output import REPORT, read_samples, read_summary
from sonic_deploy.probe.slo import ERRORS, NO_SUCCESS


def load_axis(level: dict[str, Any]) -> tuple[str, float]:
    if level["rate"] is not None:
        return "rate (requests/s)", float(level["rate"])
    return "concurrency", float(level["concurrency"])


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def summary_table(summary: dict[str, Any]) -> str:
    """One row per level, in the order they ran; with `--slo`, each level's verdict and the answer."""
    slo = summary.get("slo")
    verdicts = {} if slo is None else {tried["concurrency"]: tried for tried in slo["tried"]}
    verdict_heading = f"  {'SLO':>4}" if slo else ""
    header = (
        f"{'load':>10}{verdict_heading} {'reqs':>6} {'ok':>6}  {'TTFA p50':>9} {'p95':>7} {'p99':>7}"
        f" {'max':>7}  {'audible p50':>11} {'total p50':>9} {'RTF p50':>7} {'underruns':>9}  errors"
    )
    rows = [header]
    for level in summary["levels"]:
        name, value = load_axis(level)
        label = f"{'c' if name == 'concurrency' else 'r'}={value:g}"
        load = f"{label:>10}"
        ttfa = level["ttfa_ms"]
        errors = ", ".join(f"{k}={v}" for k, v in level["errors"].items()) or "none"
        judged = None if level.get("interrupted") else verdicts.get(level["concurrency"])
        if slo is not None:
            mark = "-" if judged is None else "pass" if judged["passed"] else "FAIL"
            load += f"  {mark:>4}"
        rows.append(
            f"{load} {level['requests']:>6} {level['ok']:>6}"
            f"  {_fmt(ttfa['p50']):>9} {_fmt(ttfa['p95']):>7}"
            f" {_fmt(ttfa['p99']):>7} {_fmt(ttfa['max']):>7}  {_fmt(level['ttfa_audible_ms']['p50']):>11}"
            f" {_fmt(level['total_ms']['p50']):>9} {_fmt(level['rtf']['p50'], 3):>7} {level['underruns']:>9}"
            f"  {errors}{_broken(judged)}"
        )
    if slo is not None:
        rows.append(verdict(slo))
    foreign = {_load_label(level): level.get("foreign_messages", 0) for level in summary["levels"]}
    if any(foreign.values()):
        rows.append(_foreign_line(foreign))
    if summary.get("target", {}).get("workload") == "agent":
        rows.append(f"workload: {workload(summary['target'])}; TTFA counts from a turn's first piece.")
        rows.append("TTFA from the last piece, p50/p95 per level (0: audio had begun before it was sent):")
        rows.extend(
            f"{_load_label(level):>10}  {_fmt(level['ttfa_last_piece_ms']['p50']):>9} "
            f"{_fmt(level['ttfa_last_piece_ms']['p95']):>7}"
            for level in summary["levels"]
            if "ttfa_last_piece_ms" in level
        )
    return "\n".join(rows)


def _foreign_line(foreign: dict[str, int]) -> str:
    """Messages for another context_id on a dedicated socket: not credited to any request (a server
    mixing streams up), so shown, not hidden in the figures."""
    counts = ", ".join(f"{label} {count}" for label, count in foreign.items() if count)
    return f"messages for another context (not credited to any request): {counts}"


def _load_label(level: dict[str, Any]) -> str:
    name, value = load_axis(level)
    return f"{'c' if name == 'concurrency' else 'r'}={value:g}"


def _broken(judged: dict[str, Any] | None) -> str:
    """The terms a level failed, with what it measured, after its errors."""
    if judged is None or judged["passed"]:
        return ""
    parts = []
    for failed in judged["failed"]:
        measured, term = failed["measured"], failed["term"]
        if term == NO_SUCCESS or measured is None:  # no latency to show
            parts.append(term)
        elif term.startswith(ERRORS):
            parts.append(f"{term} (was {100 * measured:.3g}%)")
        else:
            parts.append(f"{term} (was {measured:.1f} ms)")
    return "  breaks " + ", ".join(parts)


def workload(target: dict[str, Any]) -> str:
    """How the run sent its text: whole transcripts, or an agent's pieces (older runs: whole)."""
    if target.get("workload") != "agent":
        return "whole transcripts"
    delay = target.get("max_buffer_delay_ms")
    buffer = "API default" if delay is None else f"{delay:g} ms"
    return (
        f"agent turns ({target['split']} pieces every {target['piece_interval_ms']:g} ms, "
        f"max_buffer_delay {buffer}, one socket per call)"
    )


def _title(summary: dict[str, Any]) -> str:
    """The run in one line, escaped: a summary is a file anyone can edit (an escape sequence in its route
    must not reach the terminal)."""
    target = summary["target"]
    where = target.get("url") or target.get("endpoint")
    return one_line(
        f"{target['route']} {where}, {workload(target)}  ({summary['client']['host']}, {summary['started_at']})"
    )


def _percentile_lines(axis: Any, summary: dict[str, Any], label: str = "", style: str = "-") -> None:
    # In rising load: a capacity search (--slo) runs its levels out of order.
    levels = sorted(summary["levels"], key=lambda level: load_axis(level)[1])
    xs = [load_axis(level)[1] for level in levels]
    for key, colour in (("p50", "tab:blue"), ("p95", "tab:orange"), ("p99", "tab:red")):
        ys = [level["ttfa_ms"][key] for level in levels]
        points = [(x, y) for x, y in zip(xs, ys, strict=True) if y is not None]
        if points:
            axis.plot(*zip(*points, strict=True), style, marker="o", color=colour, label=f"{label}{key}")
    if levels:
        axis.set_xlabel(load_axis(levels[0])[0])
        if levels[0]["rate"] is None and len(xs) > 1 and min(xs) > 0:
            axis.set_xscale("log", base=2)
        axis.set_xticks(xs, [f"{x:g}" for x in xs])
        axis.minorticks_off()
        for x, level in zip(xs, levels, strict=True):
            failed = level["requests"] - level["ok"]
            if failed and label == "":
                axis.annotate(
                    f"{failed}/{level['requests']} failed",
                    (x, 0),
                    textcoords="offset points",
                    xytext=(0, 4),
                    ha="center",
                    fontsize=7,
                    color="tab:red",
                )
    axis.set_ylim(bottom=0)
    axis.set_ylabel("time to first audio (ms)")
    axis.grid(True, alpha=0.3)
    if axis.get_legend_handles_labels()[0]:
        axis.legend(fontsize=8)


def write_report(out_dir: Path) -> Path:
    summary = read_summary(out_dir)
    samples = [s for s in read_samples(out_dir) if not s["warmup"] and s["ok"] and s["ttfa_ms"] is not None]
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=90)
    _percentile_lines(left, summary)
    left.set_title("TTFA percentiles by load", fontsize=10)
    for level in summary["levels"]:
        name, value = load_axis(level)
        key = "rate" if name.startswith("rate") else "concurrency"
        values = sorted(s["ttfa_ms"] for s in samples if s[key] == level[key])
        if values:
            fractions = [(i + 1) / len(values) for i in range(len(values))]
            right.step(values, fractions, where="post", label=f"{key[0]}={value:g} (n={len(values)})")
    right.set_xlabel("time to first audio (ms)")
    right.set_ylabel("fraction of requests")
    right.set_title("TTFA CDF per level", fontsize=10)
    right.grid(True, alpha=0.3)
    if right.get_legend_handles_labels()[0]:
        right.legend(fontsize=8)
    figure.suptitle(_title(summary), fontsize=9)
    figure.tight_layout()
    path = out_dir / REPORT
    figure.savefig(path)
    plt.close(figure)
    return path


def compare(
    folders: list[Path], runs: list[dict[str, Any]], png: Path, agent: list[str] | None = None
) -> str:
    """Runs side by side (e.g. SageMaker against ECS; or one run beside an agent's telemetry, `agent` its lines
    of figures): a text table and a plot. `runs` are their summaries as `probe compare` checked them
    (probe/summary_file.py `read_run`), read once."""
    letters = "AB"[: len(runs)]
    names = [one_line(f"{letter}={folder.name}") for letter, folder in zip(letters, folders, strict=True)]
    lines = [f"{name}: {_title(run)}" for name, run in zip(names, runs, strict=True)]
    lines.append(
        f"{'load':>10}  "
        + "   ".join(f"{f'{x} p50':>7} {f'{x} p95':>7} {f'{x} p99':>7} {f'{x} err':>5}" for x in letters)
    )
    keyed = [{load_axis(level): level for level in run["levels"]} for run in runs]
    for key in sorted(set().union(*keyed), key=lambda k: (k[0], k[1])):
        cells = []
        for table in keyed:
            level = table.get(key)
            if level is None:
                cells.append(f"{'-':>7} {'-':>7} {'-':>7} {'-':>5}")
                continue
            ttfa, errors = level["ttfa_ms"], level["requests"] - level["ok"]
            cells.append(f"{_fmt(ttfa['p50']):>7} {_fmt(ttfa['p95']):>7} {_fmt(ttfa['p99']):>7} {errors:>5}")

        load = f"{'c' if key[0] == 'concurrency' else 'r'}={key[1]:g}"
        lines.append(f"{load:>10}  " + "   ".join(cells))
    for name, run in zip(letters, runs, strict=True):
        if run["target"].get("workload") == "agent":
            figures = ", ".join(
                f"{_load_label(level)} {_fmt(level['ttfa_last_piece_ms']['p95'])}"
                for level in run["levels"]
                if "ttfa_last_piece_ms" in level
            )
            lines.append(f"{name}: TTFA from the turn's last piece, p95: {figures}")
    for name, run in zip(letters, runs, strict=True):
        foreign = {_load_label(level): level.get("foreign_messages", 0) for level in run["levels"]}
        if any(foreign.values()):
            lines.append(f"{name}: {_foreign_line(foreign)}")
    lines.extend(agent or [])
    figure, axis = plt.subplots(figsize=(7, 4.2), dpi=90)
    for letter, run, style in zip(letters, runs, ("-", "--"), strict=False):
        _percentile_lines(axis, run, f"{letter} ", style)
    routes = [one_line(run["target"]["route"]) for run in runs]
    axis.set_title(
        "  vs  ".join(f"{x}: {route}" for x, route in zip(letters, routes, strict=True)), fontsize=10
    )
    figure.tight_layout()
    try:
        write_output(png, "--png", figure.savefig)
    finally:
        plt.close(figure)
    lines.append(f"plot: {png}")
    return "\n".join(lines)
