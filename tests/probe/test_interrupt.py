"""Ctrl-C during a run with --workers: the terminal's SIGINT reaches every process of the group, and none
prints a traceback; the run ends as interrupted (130) with what it measured."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.cdk_context import ROOT
from tests.foreground import foreground

BOUND_S = 60  # a hang becomes a failure after this long; the run itself takes a second or two


def test_ctrl_c_with_workers_prints_no_traceback(tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = [
        sys.executable,
        "-m",
        "sonic_deploy.cli",
        "probe",
        "http",
        "--url",
        "http://127.0.0.1:9/tts/bytes",
    ]
    argv += [
        "--workers",
        "2",
        "--rate",
        "20",
        "--duration",
        "600",
        "--quiet",
        "--no-report",
        "--out",
        str(out),
    ]
    # A session of its own, so that the signal goes to the group, as a terminal's Ctrl-C does.
    probe = foreground(argv, cwd=ROOT, stderr=subprocess.PIPE)
    try:
        waited_until = time.monotonic() + BOUND_S
        samples = out / "samples.jsonl"
        # The workers are running once their first records (connection refused, at once) are written.
        while not (samples.exists() and samples.read_text().count("\n") >= 2):
            assert probe.poll() is None, probe.communicate()[1]
            assert time.monotonic() < waited_until, "no record from the workers"
            time.sleep(0.1)
        os.killpg(probe.pid, signal.SIGINT)
        _, stderr = probe.communicate(timeout=BOUND_S)
    finally:
        if probe.poll() is None:
            os.killpg(probe.pid, signal.SIGKILL)
            probe.communicate()
    assert "Traceback" not in stderr, stderr
    assert probe.returncode == 130, stderr
    assert (out / "summary.json").is_file()
