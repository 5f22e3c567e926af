"""One synth run by the CDK CLI, staged until it is whole (no aws_cdk here: app.py hands in the synth).

The app synthesizes into a staging folder inside CDK_OUTDIR and publishes the assembly, with a stamp naming
the config and code it came from, only when everything succeeded; a config error, a failure or Ctrl-C
removes the output's assembly instead (assembly.py says why the CLI alone would leave it behind).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from sonic_deploy.changes.assembly import (
    INTERRUPTED,
    AssemblyLockedError,
    Digests,
    clear_assembly,
    descendant_pids,
    prune_assets,
    publish,
    remove_own_staging,
    seed_assets,
    staging,
    write_stamp,
)
from sonic_deploy.changes.assembly_content import synth_errors
from sonic_deploy.config import ConfigError
from sonic_deploy.config.errors import one_line

EXIT_CONFIG = 2
STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM)

SynthResult = tuple[str, Path, list[str], Digests]
"""What a synth reports: the environment, the config folder, the stack IDs, and the config's and code's
digests as they were before anything read them."""
Synthesize = Callable[[Path | None], SynthResult]
"""Builds and synthesizes the stacks into the folder given (None: a fresh temporary folder of the CDK's)."""


class StagedSynth:
    """One synth into CDK_OUTDIR (`final`), staged in `staged` until it is whole."""

    def __init__(self, final: Path | None, synthesize: Synthesize) -> None:
        self.final = final
        self.synthesize = synthesize
        self.staged: Path | None = None

    def main(self) -> int:
        """`run`, with Ctrl-C and SIGTERM handled as `interrupted` says."""
        for stopping in STOPPING_SIGNALS:
            signal.signal(stopping, self.interrupted)
        return self.run()

    def run(self) -> int:
        try:
            if self.final is None:  # run by hand: the CDK synthesizes into a temporary folder of its own
                self.synthesize(None)
                return 0
            with staging(self.final) as staged:
                self.staged = staged
                seed_assets(self.final, staged)  # the CDK skips an asset already staged: no 50 MB copy
                environment, config_dir, stack_ids, digests = self.synthesize(staged)
                prune_assets(staged)
                errors = synth_errors(staged)
                if errors:  # the CLI fails on them after we exit: published for it to show, never stamped
                    publish(staged, self.final)
                    print(f"sonic-deploy: {unstamped(errors)}", file=sys.stderr)
                    return 0
                write_stamp(
                    staged, environment=environment, config_dir=config_dir, stacks=stack_ids, digests=digests
                )
                publish(staged, self.final)
            return 0
        except ConfigError as error:
            self.clear()
            print(f"sonic-deploy: {error}", file=sys.stderr)
            return EXIT_CONFIG
        except AssemblyLockedError as error:  # another CLI reads the output: it is left as it is
            print(f"sonic-deploy: {error}", file=sys.stderr)
            return EXIT_CONFIG
        except BaseException:
            self.clear()
            raise

    def clear(self) -> None:
        if self.staged is not None:
            shutil.rmtree(self.staged, ignore_errors=True)
        if self.final is not None:
            remove_own_staging(self.final)
            with contextlib.suppress(AssemblyLockedError):  # another CLI reads it: not ours to remove
                clear_assembly(self.final)

    def interrupted(self, signum: int, _frame: FrameType | None) -> None:
        """Ctrl-C, or SIGTERM (a CI cancel, `kill`): exit 128 + the signal. Not an exception: jsii swallows
        exceptions raised inside its calls and goes on with a half-built construct tree (seen as a failed
        assertion and a traceback). So clean up and exit here; the jsii kernel exits when its pipe closes
        (or got the same SIGINT from the terminal)."""
        for stopping in STOPPING_SIGNALS:
            signal.signal(stopping, signal.SIG_IGN)
        stop_children()  # the jsii kernel may be writing into the staging folder (a SIGTERM reached us alone)
        self.clear()
        with contextlib.suppress(OSError):  # whoever read stderr may be gone
            print(f"sonic-deploy: {INTERRUPTED}", file=sys.stderr, flush=True)
        os._exit(128 + signum)


def unstamped(errors: list[str]) -> str:
    """The app's one line when the synth reported errors of its own (the CDK CLI lists them next)."""
    return one_line(
        f"the synth reported {len(errors)} error(s) (first: {errors[0][:200]}); the assembly is not stamped, "
        "so check-assembly and `make diff` refuse it. Fix: correct what the CDK lists below, or run "
        "`make synth`, which checks the config first"
    )


def stop_children() -> None:
    """Stop the jsii kernel (node and its child): it would go on writing into the staging folder."""
    pids = descendant_pids()
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid in pids:  # reap our own child; the grandchild is gone once its parent is (SIGKILL: no delay)
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
