"""Measurement: what a failing synth leaves in its output folder (issue 16, "failing synths").

Each case is a copy of config/ with one mistake, synthesized by app.py as the CDK CLI runs it (CDK_OUTDIR,
CDK_CONTEXT_JSON; without the CLI, which adds nothing to the output folder on failure) into a folder that
holds an earlier synth's manifest and templates. It counts the failing synths that left that assembly
behind, looking valid. `--app FILE` measures another app.py (e.g. `git show 5fc52ff:app.py > /tmp/old.py`);
the package is this checkout's either way. A measurement, not a test: nothing here passes or fails CI.

    .venv/bin/python bench/failing_synths.py [--app /tmp/old.py] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from sonic_deploy.compliance.context import ROOT, cli_context

DEV = "environments/dev.toml"
# (file, text to replace or "" to append, replacement, extra CDK context)
MUTATIONS: list[tuple[str, str, str, dict[str, str]]] = [
    (DEV, "", "", {"env": "nope"}),
    (DEV, 'region = "us-east-2"', 'region = "mars-1"', {}),
    (DEV, 'region = "us-east-2"', 'region = "us-east-2\\n"', {}),
    (DEV, "", "[broken\n", {}),
    (DEV, "min_instances = 2", "min_instances = -1", {}),
    (DEV, "min_instances = 2", "min_instances = true", {}),
    (DEV, "min_instances = 2", 'min_instances = "two"', {}),
    (DEV, 'cidr = "10.60.0.0/16"', 'cidr = "10.60.0.0/33"', {}),
    (DEV, 'cidr = "10.60.0.0/16"', 'cidr = "not-a-cidr"', {}),
    (DEV, 'instance_type = "ml.g6e.xlarge"', 'instance_type = "ml.nope"', {}),
    (DEV, "target_utilisation = 0.8\n", "target_utilisation = nan\n", {}),
    (DEV, 'routes = ["sagemaker", "ecs"]', 'routes = ["lambda"]', {}),
    (DEV, "nats_tasks = 3", "nats_tasks = 0", {}),
    (DEV, "log_retention_days = 30", "log_retention_days = 31", {}),
    ("prices.toml", "", "\x00\udcff", {}),
    ("model_packages.toml", "", "[[[", {}),
]
EARLIER = ("manifest.json", "SonicSageMaker.template.json", "SonicEcs.template.json")


class Outcome(NamedTuple):
    status: int
    left_behind: bool
    traceback: bool


def run_case(app: Path, index: int) -> Outcome:
    file, old, new, context = MUTATIONS[index]
    root = Path(tempfile.mkdtemp(prefix="failing-synth-"))
    try:
        shutil.copyfile(app, root / "app.py")  # the app reads config/ beside itself
        (root / "sonic_deploy").symlink_to(ROOT / "sonic_deploy")
        shutil.copytree(ROOT / "config", root / "config")
        path = root / "config" / file
        text = path.read_text(encoding="utf-8")
        path.write_text(
            text.replace(old, new) if old else text + new, encoding="utf-8", errors="surrogateescape"
        )
        out = root / "cdk.out"
        out.mkdir()
        for name in EARLIER:
            (out / name).write_text("{}", encoding="utf-8")
        env = os.environ | {"CDK_OUTDIR": str(out), "CDK_CONTEXT_JSON": json.dumps(cli_context(**context))}
        result = subprocess.run(
            [sys.executable, "app.py"],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        left = (out / "manifest.json").is_file() and any(out.glob("*.template.json"))
        return Outcome(result.returncode, left, "Traceback" in result.stderr)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--app", type=Path, default=ROOT / "app.py", help="the app.py to measure")
    parser.add_argument("--jobs", type=int, default=2, help="cases at a time (default 2)")
    args = parser.parse_args()
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        outcomes = list(pool.map(lambda i: run_case(args.app, i), range(len(MUTATIONS))))
    failed = [o for o in outcomes if o.status != 0]
    print(
        f"{args.app}: {len(MUTATIONS)} mutations, {len(failed)} failing synths, "
        f"{sum(o.left_behind for o in failed)} left the earlier manifest and templates behind, "
        f"{sum(o.status == 2 for o in failed)} exited 2, {sum(o.traceback for o in failed)} with a traceback"
    )


if __name__ == "__main__":
    main()
