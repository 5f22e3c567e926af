"""Write refreshed rows into config/prices.toml in place, keeping every comment and every other row."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from sonic_deploy.planner.price_refresh import RefreshedPrice
from sonic_deploy.planner.price_table import PriceRow, load_price_table


def section_header(price: RefreshedPrice) -> str:
    return f'[regions."{price.region}".{price.kind}."{price.instance_type}"]'


def render_row(row: PriceRow) -> list[str]:
    # json.dumps gives a valid TOML basic string for any text (same escapes).
    lines = [
        f"usd = {row.usd!r}",
        f"unit = {json.dumps(row.unit)}",
        f"taken_on = {row.taken_on.isoformat()}",
        f"source = {json.dumps(row.source)}",
    ]
    if row.unverified:
        lines.append("unverified = true")
    return lines


def update_price_table(text: str, prices: list[RefreshedPrice]) -> str:
    lines = text.splitlines()
    for price in prices:
        header = section_header(price)
        body = render_row(price.row)
        try:
            start = next(i for i, line in enumerate(lines) if line.strip() == header)
        except StopIteration:
            lines.extend(["", header, *body])
            continue
        end = next((i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
        old = lines[start + 1 : end]
        comments = [line for line in old if line.lstrip().startswith("#")]
        # Keep the blank lines and comments that separate this row from the next section.
        trailing: list[str] = []
        while old and (not old[-1].strip() or old[-1].lstrip().startswith("#")):
            trailing.insert(0, old.pop())
        leading_comments = [line for line in comments if line not in trailing]
        lines[start + 1 : end] = [*leading_comments, *body, *trailing]
    return "\n".join(lines) + "\n"


def write_price_table(path: Path, prices: list[RefreshedPrice]) -> None:
    """Rewrite the file atomically, and only if the result still loads."""
    updated = update_price_table(path.read_text(), prices)
    # load_price_table reads <dir>/prices.toml: check the new text under that name in a scratch folder first.
    with tempfile.TemporaryDirectory() as scratch:
        (Path(scratch) / path.name).write_text(updated)
        load_price_table(Path(scratch))
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".prices-", suffix=".toml")
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(updated)
        Path(temporary).replace(path)
    finally:
        Path(temporary).unlink(missing_ok=True)
