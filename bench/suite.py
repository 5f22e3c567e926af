"""Measurement: what the test suite costs (issue 30's goal: `make test` <= 240 s wall and <= 300 CPU-seconds
on the 2-core VM, setup done, the machine quiet): wall time, the CPU-seconds of the whole process tree
(user + sys of every descendant reaped by its parent, as the kernel accounts them: getrusage's
RUSAGE_CHILDREN), and pytest's slowest 20. `--baseline REF` measures REF's suite first, in a temporary
worktree sharing this checkout's .venv and node_modules, and prints the ratios. A measurement, not a test.

    .venv/bin/python bench/suite.py                      # make test
    .venv/bin/python bench/suite.py --baseline HEAD~3    # and against an earlier commit, same run
    .venv/bin/python bench/suite.py --pytest tests/config   # one pytest run instead of make test
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOAL_WALL_S = 240.0
GOAL_CPU_S = 300.0
SLOWEST = 20
SUMMARY = re.compile(r"^=*\s*(\d+ (?:passed|failed).*?) in [0-9.]+s", re.MULTILINE)


@dataclass(frozen=True)
class Run:
    wall_s: float
    cpu_s: float
    exit_code: int
    summary: str
    slowest: list[str]


def measure(command: list[str], cwd: Path, env: dict[str, str]) -> Run:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = done.stdout + done.stderr
    summary = SUMMARY.findall(out)
    section = out.split(f"slowest {SLOWEST} durations", 1)
    slowest = (
        [line for line in section[1].splitlines()[1 : SLOWEST + 1] if line.strip()]
        if len(section) > 1
        else []
    )
    if done.returncode != 0:
        sys.stderr.write(out[-4000:])
    return Run(wall, cpu, done.returncode, summary[-1] if summary else "(no pytest summary)", slowest)


def show(label: str, run: Run) -> None:
    print(f"{label}: {run.wall_s:7.1f} s wall  {run.cpu_s:7.1f} CPU-s  exit {run.exit_code}  ({run.summary})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", metavar="REF", help="also measure this git ref's suite, first")
    parser.add_argument("--pytest", nargs=argparse.REMAINDER, help="run pytest with these arguments instead")
    args = parser.parse_args()
    env = {**os.environ, "PYTEST_ADDOPTS": f"{os.environ.get('PYTEST_ADDOPTS', '')} --durations={SLOWEST}"}
    command = [sys.executable, "-m", "pytest", *args.pytest] if args.pytest is not None else ["make", "test"]

    runs: dict[str, Run] = {}
    if args.baseline:
        with tempfile.TemporaryDirectory(prefix="suite-baseline-") as tmp:
            tree = Path(tmp) / "tree"
            subprocess.run(
                ["git", "worktree", "add", "--detach", str(tree), args.baseline], cwd=ROOT, check=True
            )
            try:
                for shared in (".venv", "node_modules", ".venv-checkov"):
                    if (ROOT / shared).exists():
                        (tree / shared).symlink_to(ROOT / shared)
                # The shared .venv's editable install points at this checkout: put the baseline's code first,
                # and never let its make reinstall (the stamps are the shared ones).
                base_env = {**env, "PYTHONPATH": str(tree)}
                stamps = [
                    ".venv/.installed",
                    ".venv/.installed-synth",
                    "node_modules/.installed",
                    ".venv-checkov/.installed",
                ]
                base_command = (
                    command
                    if args.pytest is not None
                    else ["make", *(f"--old-file={stamp}" for stamp in stamps), "test"]
                )
                runs[f"baseline {args.baseline}"] = measure(base_command, tree, base_env)
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
    runs["this checkout"] = measure(command, ROOT, env)

    print(f"command: {' '.join(command)}")
    for label, run in runs.items():
        show(label, run)
    current = runs["this checkout"]
    print(
        f"goal: {GOAL_WALL_S:.0f} s wall, {GOAL_CPU_S:.0f} CPU-s -> "
        f"{current.wall_s / GOAL_WALL_S:.2f}x and {current.cpu_s / GOAL_CPU_S:.2f}x of it"
    )
    if args.baseline:
        base = runs[f"baseline {args.baseline}"]
        print(
            f"ratio to baseline: {current.wall_s / base.wall_s:.2f}x wall, {current.cpu_s / base.cpu_s:.2f}x CPU"
        )
    print(f"slowest {SLOWEST} (this checkout):")
    for line in current.slowest:
        print(f"  {line}")
    return 0 if all(run.exit_code == 0 for run in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
