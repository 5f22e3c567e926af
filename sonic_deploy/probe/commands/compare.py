"""`sonic-deploy probe compare`: two runs side by side, their summaries checked before anything is shown."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sonic_deploy.arguments import option_message, output_file
from sonic_deploy.config.errors import ConfigError, one_line
from sonic_deploy.probe.arguments import missing_extra
from sonic_deploy.probe.summary_file import SUMMARY, read_run


@dataclass(frozen=True)
class CompareOptions:
    folders: list[Path]
    runs: list[dict[str, Any]]  # the summaries, as `check` read and checked them
    png: Path
    agent: list[str] | None  # the agent's figures, as `check` read them


def _run_folder(text: str) -> Path:
    """A probe run's folder, or its summary.json: the folder (where compare reads summary.json)."""
    path = Path(text)
    if path.name == SUMMARY and path.is_file():
        return path.parent
    if not path.is_dir():
        problem = "no such run" if not path.exists() else "not a run's folder or its summary.json"
        raise argparse.ArgumentTypeError(
            f"{one_line(repr(text))}: {problem}. Fix: give the folder a probe run wrote (its --out)"
        )
    if not (path / SUMMARY).is_file():
        raise argparse.ArgumentTypeError(
            f"{one_line(repr(text))}: no {SUMMARY} in it. Fix: give the folder a probe run wrote (its --out)"
        )
    return path


def add_parser(routes: Any) -> None:
    compare = routes.add_parser(
        "compare", help="print and plot two runs side by side (or a run and an agent)"
    )
    compare.add_argument("first", type=_run_folder, help="a run's folder (or its summary.json)")
    compare.add_argument(
        "second", type=_run_folder, nargs="?", help="the other run's folder (or its summary.json)"
    )
    compare.add_argument(
        "--agent",
        type=Path,
        help='an agent\'s telemetry lines (docs/client.md, "Telemetry"): its first audio and hops beside the runs',
    )
    compare.add_argument("--png", type=output_file("the plot"), default=Path("compare.png"))
    compare.set_defaults(func=run, check=check, command_parser=compare)


def check(args: argparse.Namespace) -> str | None:
    """Both runs' summaries as the probe writes them: a corrupt or edited one is refused, naming the field.
    The checked summaries are what compare shows (`args.runs`): each file is read once."""
    if args.second is None and args.agent is None:
        return (
            "compare: one run alone. Fix: give a second run's folder, or --agent FILE (an agent's telemetry)"
        )
    args.folders = [folder for folder in (args.first, args.second) if folder is not None]
    args.runs = [read_run(folder) for folder in args.folders]  # a ConfigError names the field
    args.agent_lines = None
    if args.agent is not None:
        from sonic_deploy.dashboard_series import load_agent
        from sonic_deploy.probe.agent_figures import agent_lines

        try:
            args.agent_lines = agent_lines(args.agent, load_agent(args.agent))
        except ConfigError as error:  # names the file and the line: here, the option too
            return f"--agent {option_message(error)}"
    return None


def run(args: argparse.Namespace) -> int:
    options = CompareOptions(args.folders, args.runs, args.png, args.agent_lines)
    try:
        from sonic_deploy.probe.report import compare
    except ImportError as error:
        return missing_extra(error)

    print(compare(options.folders, options.runs, options.png, options.agent))
    return 0
