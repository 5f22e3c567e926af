"""A price `plan` would print and add up is a finite, plausible number: NaN, infinity, a boolean and 1e308
are refused with the row that holds them (issue 16)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sonic_deploy.config import ConfigError
from sonic_deploy.planner.price_table import PRICES_FILE, load_price_table
from tests.cdk_context import ROOT

SHIPPED = "usd = 1.861"


@pytest.mark.parametrize("usd", ["nan", "inf", "-inf", "true", "1e308", "2e5"])
def test_an_absurd_price_is_refused(tmp_path: Path, usd: str) -> None:
    shutil.copy(ROOT / "config" / PRICES_FILE, tmp_path / PRICES_FILE)
    text = (tmp_path / PRICES_FILE).read_text()
    assert SHIPPED in text
    (tmp_path / PRICES_FILE).write_text(text.replace(SHIPPED, f"usd = {usd}", 1))
    with pytest.raises(ConfigError) as caught:
        load_price_table(tmp_path)
    assert caught.value.field.endswith(".usd")
    assert str(caught.value).isprintable()


def test_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    (tmp_path / PRICES_FILE).write_bytes((ROOT / "config" / PRICES_FILE).read_bytes() + b'\nx = "\xff"\n')
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        load_price_table(tmp_path)


def test_unreadable_prices_get_the_loaders_errors(tmp_path: Path) -> None:
    """One reader for config/: bytes that are not UTF-8 name their line and the fix is to re-save, not to
    'correct the syntax at that line'; nesting too deep to read says how deep to nest."""
    shipped = (ROOT / "config" / PRICES_FILE).read_bytes()
    (tmp_path / PRICES_FILE).write_bytes(shipped + b'\nx = "\xff"\n')
    with pytest.raises(ConfigError) as caught:
        load_price_table(tmp_path)
    lines = shipped.count(b"\n") + 2
    assert f"the bytes at line {lines} are not UTF-8" in str(caught.value)
    assert caught.value.fix.startswith("save the file as UTF-8")

    (tmp_path / PRICES_FILE).write_bytes(b"x = " + b"[" * 3000 + b"]" * 3000 + b"\n")
    with pytest.raises(ConfigError) as caught:
        load_price_table(tmp_path)
    assert "correct the syntax" not in caught.value.fix
    assert caught.value.fix.startswith("nest at most a few levels")


def test_prices_that_are_a_folder(tmp_path: Path) -> None:
    (tmp_path / PRICES_FILE).mkdir()
    with pytest.raises(ConfigError) as caught:
        load_price_table(tmp_path)
    assert caught.value.problem.startswith("a folder, where a TOML file should be")
