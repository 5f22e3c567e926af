"""Hostile command-line input for every command, and the generators (hypothesis strategies) that read each
subparser's options from its `build_parser()`, so that an option added later is fuzzed too."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

# Numbers as a hostile user types them: not numbers, not finite, out of any range, with a newline.
HOSTILE_NUMBERS = ("nan", "inf", "-inf", "-1", "0", "1e9", "1e308", "", "abc", "1\n", "0x10", "9" * 40)
HOSTILE_URLS = (
    "",
    "localhost:8080",
    "ftp://127.0.0.1/x",
    "ws://",
    "http://:80/x",
    "ws://127.0.0.1:99999/x",
    "ws://127.0.0.1:abc/x",
    "http://127.0.0.1/\nx",
    "ws://[::1/x",
    "ws://127.0.0.1:0/x",
)


def hostile_paths(folder: Path) -> dict[str, Path]:
    """Files a user passes by mistake: missing, empty, binary, a directory, and a path under a file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "empty").write_bytes(b"")
    (folder / "binary").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe" * 8)
    (folder / "a-directory").mkdir(exist_ok=True)
    return {
        "missing": folder / "missing",
        "empty": folder / "empty",
        "binary": folder / "binary",
        "a directory": folder / "a-directory",
        # Run as root, permissions do not stop a write: a path whose parent is a regular file always does.
        "unwritable": folder / "empty" / "out",
    }


def _quantiles(value: float | None) -> dict[str, float | None]:
    return {key: value for key in ("p50", "p90", "p95", "p99", "max")}


def summary_level(
    concurrency: int | None = 4, requests: int = 100, ok: int = 100, p95: Any = 120.0
) -> dict[str, Any]:
    """A level as the probe's summary.json holds it (probe/stats.py `LevelStats.summary`)."""
    return {
        "concurrency": concurrency,
        "rate": None if concurrency is not None else 5.0,
        "requests": requests,
        "ok": ok,
        "errors": {} if ok == requests else {"429": requests - ok},
        "ttfa_ms": {**_quantiles(100.0), "p95": p95},
        "total_ms": _quantiles(900.0),
        "rtf": _quantiles(0.3),
        "underruns": 0,
        "ttfa_audible_ms": _quantiles(110.0),
    }


def summary_json(levels: list[Any], **extra: Any) -> dict[str, Any]:
    return {
        "target": {"route": "http", "url": "http://127.0.0.1:8080/tts/bytes"},
        "levels": levels,
        "client": {"host": "client"},
        "started_at": "2026-12-01T22:00:00+00:00",
        "version": "1",
        **extra,
    }


def _encoded(data: Any) -> bytes:
    return json.dumps(data).encode()


_VALID = summary_json([summary_level(1, p95=60.0), summary_level(2, p95=80.0), summary_level(4)])
# Each one a summary.json that must be refused (but "valid"): named for the report and the tests.
CORRUPT_SUMMARIES: dict[str, bytes] = {
    "valid": _encoded(_VALID),
    "truncated": _encoded(_VALID)[:200],
    "binary": b"\x00\xff\xfe" * 30,
    "empty": b"",
    "not an object": b"[1, 2, 3]",
    "levels not a list": _encoded(summary_json({"c": 1})),  # type: ignore[arg-type]
    "NaN p95": _encoded(summary_json([summary_level(4, p95=math.nan)])),
    "Infinity p95": _encoded(summary_json([summary_level(4, p95=math.inf)])),
    "negative p95": _encoded(summary_json([summary_level(4, p95=-5.0)])),
    "p95 a string": _encoded(summary_json([summary_level(4, p95="120")])),
    "negative requests": _encoded(summary_json([summary_level(4, requests=-10, ok=-10)])),
    "ok > requests": _encoded(summary_json([summary_level(4, requests=10, ok=500)])),
    "absurd concurrency": _encoded(summary_json([summary_level(10**12)])),
    "zero concurrency": _encoded(summary_json([summary_level(0)])),
    "fractional concurrency": _encoded(summary_json([{**summary_level(4), "concurrency": 4.5}])),
    "boolean ok": _encoded(summary_json([{**summary_level(4), "ok": True, "requests": 1}])),
    "concurrency a string": _encoded(summary_json([{**summary_level(4), "concurrency": "4"}])),
    "duplicate concurrency": _encoded(summary_json([summary_level(4), summary_level(4, p95=900.0)])),
    "huge requests": _encoded(summary_json([summary_level(4, requests=10**30, ok=10**30)])),
    "level not an object": _encoded(summary_json([summary_level(2), "level"])),
    "target not an object": _encoded({**_VALID, "target": "x"}),
    "slo answer not a level": _encoded(
        {**_VALID, "slo": {"spec": "ttfa_p95<=250ms", "finished": True, "max_concurrency": 64}}
    ),
}
