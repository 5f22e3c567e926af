"""Ctrl-C in the first second of a command, while Python still loads pydantic or aws_cdk: one line and exit
130, never a KeyboardInterrupt traceback from inside an import. (Not before 0.3 s: Python's own start-up,
site and the editable install's finder, comes before any of the project's code.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sonic_deploy.interrupt import quiet_ctrl_c
from tests.cdk_context import ROOT, cli_context
from tests.foreground import foreground


def interrupted_after(seconds: float, command: list[str], **env: str) -> tuple[int, str]:
    process = foreground(
        command, cwd=ROOT, env=os.environ | env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        time.sleep(seconds)
        os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    return process.returncode, stderr


@pytest.mark.parametrize("seconds", [0.3, 0.8])
def test_ctrl_c_while_the_probe_loads(tmp_path: Path, seconds: float) -> None:
    probe = ["probe", "ws", "--url", "ws://127.0.0.1:9/tts", "--api-key", "x", "--out", str(tmp_path / "run")]
    status, stderr = interrupted_after(seconds, [sys.executable, "-m", "sonic_deploy.cli", *probe])
    assert status == 130 and "Traceback" not in stderr, stderr


@pytest.mark.parametrize("seconds", [0.3, 0.8])
def test_ctrl_c_while_the_synth_loads(tmp_path: Path, seconds: float) -> None:
    context = json.dumps(cli_context())
    status, stderr = interrupted_after(
        seconds, [sys.executable, "app.py"], CDK_OUTDIR=str(tmp_path / "out"), CDK_CONTEXT_JSON=context
    )
    assert status == 130 and "Traceback" not in stderr, stderr
    assert stderr.splitlines()[-1] == "sonic-deploy: synth interrupted; no assembly was written"


def test_a_command_loading_off_the_main_thread_leaves_the_handler_alone() -> None:
    """Only the main thread may set a signal handler: `main` run from a thread (an embedding program) loads its
    command as it would without the guard. Python's own handler is put in place first, as in a command."""
    raised: list[BaseException] = []

    def load() -> None:
        try:
            with quiet_ctrl_c("interrupted"):
                assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        except BaseException as error:  # reported by the assert below, on the main thread
            raised.append(error)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # a test runner's may differ
    try:
        thread = threading.Thread(target=load)
        thread.start()
        thread.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert raised == []
