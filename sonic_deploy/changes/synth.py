"""`python -m sonic_deploy.changes.synth`: what `make synth` and `make synth-envs` run around `cdk synth`.

The CDK CLI exits 1 whatever the app's exit status (aws/aws-cdk-cli packages/aws-cdk/lib/cli/cli.ts: any
error sets `process.exitCode = 1`) and adds a line of its own, `<app command>: Subprocess exited with error
2` (packages/@aws-cdk/toolkit-lib/lib/api/cloud-assembly/private/exec.ts). The app exits 2 only for a
config error, so this wrapper drops that line and exits 2: the user sees the app's one line.

It also synthesizes into a staging folder inside the output (so a CLI killed by Ctrl-C leaves its
`synth.lock` there, not in the output) and publishes the assembly only when the CLI succeeded and the app
stamped it; on any failure the output's assembly is removed (sonic_deploy/changes/assembly.py).

Exit codes: 0 synthesized, 1 the synth failed (the CDK said why), 2 a config or usage error, 130 Ctrl-C,
143 SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import IO

from sonic_deploy.interrupt import quiet_ctrl_c

with quiet_ctrl_c("sonic-deploy: synth interrupted; no assembly was written"):  # pydantic loads for a second
    from sonic_deploy.changes.assembly import (
        INTERRUPTED,
        AssemblyLockedError,
        check_assembly,
        check_unlocked,
        clear_assembly,
        publish,
        remove_locks,
        seed_assets,
        staging,
        synth_lock,
    )
    from sonic_deploy.changes.targets import TargetError, environment_routes
    from sonic_deploy.changes.templates import TemplateError
    from sonic_deploy.config import ConfigError, load_settings
    from sonic_deploy.config.errors import one_line

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""Ctrl-C, and what a CI cancel or `kill` sends: both stop the synth the same way (exit 128 + the signal)."""
CONFIG_ERROR_EXIT = re.compile(r": Subprocess exited with error 2\s*$")
"""The CLI's line after an app that exited 2 (exec.ts: `${commandAndArgs}: Subprocess ${failure}`)."""
APP_ERROR_PREFIX = "sonic-deploy: "
"""How app.py's one line for a user's mistake starts. Exit 2 alone is not enough: Python exits 2 too when
it cannot open app.py, and that line and the CLI's must then be shown."""
CHILD_EXIT_SECONDS = 60
"""After Ctrl-C, how long the CDK CLI (which got the same SIGINT) may take to exit before it is killed."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m sonic_deploy.changes.synth", description=__doc__)
    parser.add_argument("--cdk", required=True, help="the CDK CLI command line (a shell command)")
    parser.add_argument("--output", type=Path, required=True, help="the cloud assembly folder to publish")
    parser.add_argument("--env", help="environment (default: the config's default)")
    parser.add_argument("--config", type=Path, default=Path("config"), help="config folder (default: config)")
    return parser


def cdk_synth_command(cdk: str, *, env: str | None, config: Path, output: Path) -> str:
    """The app reads the config folder this wrapper checked (app.py's `-c config=`)."""
    context = [*(["-c", f"env={env}"] if env else []), "-c", f"config={config.resolve()}"]
    return f"{cdk} {shlex.join(['synth', '--quiet', '--no-notices', *context, '--output', str(output)])}"


def discard(output: Path) -> None:
    """After a failure: no assembly, and no lock of a CLI that is gone (AssemblyLockedError while another
    CLI holds a live lock there: its assembly is left alone)."""
    if output.is_dir():
        with synth_lock(output):
            clear_assembly(output)


def run(cdk: str, *, output: Path, env: str | None, config: Path) -> int:
    # Checked before Node starts: an unknown ENV or a config error is one line and exit 2 in a second.
    if env is not None:
        environment_routes(config, env)
    environment = load_settings(config, env).environment_name
    if output.is_dir():
        check_unlocked(output)  # before half a minute of synth: a `cdk deploy` reading it must finish first
    with staging(output) as staged:
        seed_assets(output, staged)  # the app links them into its own staging folder, and the CDK reuses them
        status, config_error = _run_cli(cdk, env=env, config=config, staged=staged, output=output)
        remove_locks(staged)  # the CLI has exited: any lock file left is a dead one
        if status != 0:
            discard(output)
            return EXIT_USAGE if config_error else EXIT_FAILED
        check_assembly(staged, environment=environment, config_dir=config)
        with synth_lock(output):  # also removes dead locks, e.g. of an interrupted plain `cdk synth`
            publish(staged, output)
    return EXIT_OK


class _Stderr(threading.Thread):
    """Passes the CLI's stderr through line by line, but for the CLI's own line after a config error."""

    def __init__(self, stream: IO[str], *, staged: Path, output: Path) -> None:
        super().__init__(daemon=True)
        self.stream = stream
        self.staged, self.output = str(staged), str(output)
        self.config_error = False
        self.said_interrupted = False
        self.app_said_error = False

    def run(self) -> None:
        for line in self.stream:
            if self.app_said_error and CONFIG_ERROR_EXIT.search(line):
                self.config_error = True
                continue
            self.app_said_error |= line.startswith(APP_ERROR_PREFIX)
            self.said_interrupted |= INTERRUPTED in line
            sys.stderr.write(line.replace(self.staged, self.output))  # "Successfully synthesized to"
            sys.stderr.flush()


def _run_cli(cdk: str, *, env: str | None, config: Path, staged: Path, output: Path) -> tuple[int, bool]:
    """The CLI's exit status, and whether the app reported a config error."""
    command = cdk_synth_command(cdk, env=env, config=config, output=staged)
    # In a process group of its own, so that the CLI and the app get a SIGINT however this wrapper was
    # stopped (a terminal's Ctrl-C reaches only the foreground group; a CI cancel's SIGTERM only us).
    process = subprocess.Popen(
        command, shell=True, executable="/bin/bash", stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    assert process.stderr is not None
    stderr = _Stderr(process.stderr, staged=staged, output=output)
    stderr.start()
    try:
        status = process.wait()
    except _StoppedError as stopped:
        # Let the CLI and the app clean up (the app removes its staging folder and says so), then stop them.
        for stopping in STOPPING_SIGNALS:
            signal.signal(stopping, signal.SIG_IGN)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=CHILD_EXIT_SECONDS)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        stderr.join(timeout=CHILD_EXIT_SECONDS)
        stopped.said = stderr.said_interrupted
        raise
    stderr.join(timeout=CHILD_EXIT_SECONDS)  # the app, which shares the pipe, may outlive the CLI
    return status, stderr.config_error


class _StoppedError(Exception):
    """SIGINT or SIGTERM arrived: raised from the signal handler, in the main thread."""

    def __init__(self, signum: int) -> None:
        super().__init__(INTERRUPTED)
        self.signum = signum
        self.said = False  # whether the app said it already


def _stop(signum: int, _frame: FrameType | None) -> None:
    raise _StoppedError(signum)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for stopping in STOPPING_SIGNALS:
        signal.signal(stopping, _stop)
    try:
        return _main(args)
    except AssemblyLockedError as error:  # also from the clean-up after another error: this line says why
        print(f"error: {one_line(str(error))}", file=sys.stderr)
        return EXIT_USAGE


def _main(args: argparse.Namespace) -> int:
    try:
        return run(args.cdk, output=args.output, env=args.env, config=args.config)
    except AssemblyLockedError:
        raise
    except ConfigError as error:
        discard(args.output)
        print(f"sonic-deploy: {error}", file=sys.stderr)
        return EXIT_USAGE
    except TargetError as error:
        # a usage error (an unknown ENV), checked first: the last good assembly stays
        print(f"error: {one_line(str(error))}", file=sys.stderr)
        return EXIT_USAGE
    except TemplateError as error:
        print(f"error: {one_line(str(error))}", file=sys.stderr)
        discard(args.output)
        return EXIT_USAGE
    except OSError as error:  # the output folder cannot be made or written
        print(
            f"error: --output {str(args.output)!r}: cannot write a cloud assembly there "
            f"({error.strerror or type(error).__name__}). Fix: name a folder you can write "
            "(make: SYNTH_OUT=..., SYNTH_DIR=...)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except _StoppedError as stopped:
        for stopping in STOPPING_SIGNALS:
            signal.signal(stopping, signal.SIG_IGN)
        discard(args.output)
        if not stopped.said:
            print(f"sonic-deploy: {INTERRUPTED}", file=sys.stderr)
        return 128 + stopped.signum


if __name__ == "__main__":
    sys.exit(main())
