"""`sonic-deploy probe compare`: two runs side by side, their summaries checked before anything is shown."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sonic_deploy.arguments import output_file
from sonic_deploy.config.errors import one_line
from sonic_deploy.probe.arguments import missing_extra
from sonic_deploy.probe.summary_file import SUMMARY, read_run


@dataclass(frozen=True)
class CompareOptions:
    first: Path
    second: Path
    runs: list[dict[str, Any]]  # the two summaries, as `check` read and checked them
    png: Path


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
    compare = routes.add_parser("compare", help="print and plot two runs side by side")
    compare.add_argument("first", type=_run_folder, help="a run's folder (or its summary.json)")
    compare.add_argument("second", type=_run_folder, help="the other run's folder (or its summary.json)")
    compare.add_argument("--png", type=output_file("the plot"), default=Path("compare.png"))
    compare.set_defaults(func=run, check=check, command_parser=compare)


def check(args: argparse.Namespace) -> str | None:
    """Both runs' summaries as the probe writes them: a corrupt or edited one is refused, naming the field.
    The checked summaries are what compare shows (`args.runs`): each file is read once."""
    args.runs = [read_run(folder) for folder in (args.first, args.second)]  # a ConfigError names the field
    return None


def run(args: argparse.Namespace) -> int:
    options = CompareOptions(args.first, args.second, args.runs, args.png)
    try:
        from sonic_deploy.probe.report import compare
    except ImportError as error:
        return missing_extra(error)

    print(compare(options.first, options.second, options.runs, options.png))
    return 0
