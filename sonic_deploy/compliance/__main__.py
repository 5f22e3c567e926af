"""`python -m sonic_deploy.compliance` (`make compliance`): every scanner over every variant; exits 1 when
anything is found that is neither fixed nor acknowledged with a reason, or (`--check-docs`) when the docs it
writes are stale. `make regenerate` writes them (`--write-docs`)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from sonic_deploy.compliance.context import ROOT
from sonic_deploy.compliance.gate import (
    ACKNOWLEDGED_DOC,
    SECURITY_DOC,
    acknowledged_doc,
    problems_of,
    scan,
    stale_docs,
    table,
    with_table,
)
from sonic_deploy.compliance.variants import variants

DEFAULT_CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sonic_deploy.compliance", description=__doc__)
    parser.add_argument("--config", type=Path, default=ROOT / "config", help="the config folder (config/)")
    parser.add_argument("--checkov", type=Path, default=DEFAULT_CHECKOV, help="the checkov executable")
    parser.add_argument(
        "--write-docs",
        action="store_true",
        help=f"write the table into docs/{SECURITY_DOC.name} and every acknowledged finding into {ACKNOWLEDGED_DOC.name}",
    )
    parser.add_argument(
        "--check-docs", action="store_true", help="fail when those docs differ from this run's (CI's gate)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="sonic-compliance-") as workdir:
        results = [
            scan(variant, args.config, Path(workdir), args.checkov) for variant in variants(args.config)
        ]
    print(table(results))
    problems = problems_of(results)
    if args.write_docs:
        SECURITY_DOC.write_text(
            with_table(SECURITY_DOC.read_text(encoding="utf-8"), table(results)), encoding="utf-8"
        )
        ACKNOWLEDGED_DOC.write_text(acknowledged_doc(results), encoding="utf-8")
    elif args.check_docs:
        problems += [f"{doc} is stale: run `make regenerate`" for doc in stale_docs(results)]
    for problem in problems:
        print(problem)
    print(
        f"{len(problems)} problems left"
        if problems
        else "no findings left: every one is fixed or acknowledged"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
