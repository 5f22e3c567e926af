"""The stand-ins import nothing of the probe (they are what it is measured against) and never aws_cdk."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import sonic_deploy.standins


def test_the_stand_ins_import_neither_the_probe_nor_aws_cdk() -> None:
    modules = [
        f"sonic_deploy.standins.{m.name}" for m in pkgutil.iter_modules(sonic_deploy.standins.__path__)
    ]
    code = (
        f"import importlib, sys; [importlib.import_module(m) for m in {modules!r}]; "
        "print(sorted(m for m in sys.modules if m.startswith(('sonic_deploy.probe', 'aws_cdk', 'constructs'))))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert len(modules) > 5
    assert result.stdout.strip() == "[]"
