#!/usr/bin/env python3
"""The CDK app. The only place that reads the environment and CDK context.

cdk synth                 # the default environment (config/environments/dev.toml)
cdk synth -c env=prod     # another one
cdk synth -c config=DIR   # another config folder (default: config/ beside this file)

Run by the CDK CLI (CDK_OUTDIR set), the app synthesizes into a staging folder and publishes the assembly,
with a stamp naming the config and code it came from, only when everything succeeded; a config error, a
failure or Ctrl-C removes the output's assembly instead (sonic_deploy/changes/assembly.py says why).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
from pathlib import Path
from types import FrameType

from aws_cdk import App

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
from sonic_deploy.config import ConfigError, load_settings
from sonic_deploy.stacks import add_stacks

CONFIG_DIR = Path(__file__).resolve().parent / "config"
EXIT_CONFIG = 2
STOPPING_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Synth:
    """One synth into CDK_OUTDIR (`final`), staged in `staged` until it is whole."""

    def __init__(self, final: Path | None) -> None:
        self.final = final
        self.staged: Path | None = None

    def run(self) -> int:
        try:
            if self.final is None:  # run by hand: App() synthesizes into a fresh temporary folder of its own
                self.synthesize(App())
                return 0
            with staging(self.final) as staged:
                self.staged = staged
                seed_assets(self.final, staged)  # the CDK skips an asset already staged: no 50 MB copy
                environment, config_dir, stack_ids, digests = self.synthesize(App(outdir=str(staged)))
                prune_assets(staged)
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

    @staticmethod
    def synthesize(app: App) -> tuple[str, Path, list[str], Digests]:
        """Build and synthesize the environment's stacks into the app's outdir: the environment, the config
        folder, the stack IDs, and the config's and code's digests as they were before anything read them."""
        env_name, config = app.node.try_get_context("env"), app.node.try_get_context("config")
        config_dir = Path(str(config)) if config is not None else CONFIG_DIR
        digests = Digests.of(config_dir)
        settings = load_settings(config_dir, str(env_name) if env_name is not None else None)
        stacks = add_stacks(app, settings, default_account=os.environ.get("CDK_DEFAULT_ACCOUNT"))
        app.synth()
        return (
            settings.environment_name,
            config_dir,
            [stack.artifact_id for stack in stacks.values()],
            digests,
        )

    def clear(self) -> None:
        if self.staged is not None:
            shutil.rmtree(self.staged, ignore_errors=True)
        if self.final is not None:
            remove_own_staging(self.final)
            with contextlib.suppress(AssemblyLockedError):  # another CLI reads it: not ours to remove
                clear_assembly(self.final)

    def interrupted(self, signum: int, _frame: FrameType | None) -> None:
        """Ctrl-C, or SIGTERM (a CI cancel, `kill`): exit 128 + the signal. Not an exception: jsii swallows
        exceptions raised inside its calls and goes on with a half-built construct tree (seen as a failed assertion and a traceback). So clean up and exit here;
        the jsii kernel exits when its pipe closes (or got the same SIGINT from the terminal)."""
        for stopping in STOPPING_SIGNALS:
            signal.signal(stopping, signal.SIG_IGN)
        stop_children()  # the jsii kernel may be writing into the staging folder (a SIGTERM reached us alone)
        self.clear()
        with contextlib.suppress(OSError):  # whoever read stderr may be gone
            print(f"sonic-deploy: {INTERRUPTED}", file=sys.stderr, flush=True)
        os._exit(128 + signum)


def stop_children() -> None:
    """Stop the jsii kernel (node and its child): it would go on writing into the staging folder."""
    pids = descendant_pids()
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid in pids:  # reap our own child; the grandchild is gone once its parent is (SIGKILL: no delay)
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)


def main() -> int:
    outdir = os.environ.get("CDK_OUTDIR")
    synth = Synth(Path(outdir) if outdir else None)
    for stopping in STOPPING_SIGNALS:
        signal.signal(stopping, synth.interrupted)
    return synth.run()


if __name__ == "__main__":
    sys.exit(main())
