"""Hostile command-line input for every command, and the generators (hypothesis strategies) that read each
subparser's options from its `build_parser()`, so that an option added later is fuzzed too."""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

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
    """Files a user passes by mistake: missing, empty, binary, a directory, a path under a file, a FIFO, a
    link loop, an 8 GiB file and a path under /proc."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "empty").write_bytes(b"")
    (folder / "binary").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe" * 8)
    (folder / "a-directory").mkdir(exist_ok=True)
    if not (folder / "a-fifo").exists():
        os.mkfifo(folder / "a-fifo")  # opened for reading, it waits for a writer that never comes
    if not (folder / "a-link-loop").is_symlink():
        (folder / "a-link-loop").symlink_to("a-link-loop")
    with (folder / "8-gib").open("wb") as huge:  # sparse: no disk, but read whole it is a MemoryError
        huge.truncate(8 * 2**30)
    return {
        "missing": folder / "missing",
        "empty": folder / "empty",
        "binary": folder / "binary",
        "a directory": folder / "a-directory",
        # Run as root, permissions do not stop a write: a path whose parent is a regular file always does.
        "unwritable": folder / "empty" / "out",
        "a fifo": folder / "a-fifo",
        "a link loop": folder / "a-link-loop",
        "8 GiB": folder / "8-gib",
        # Writable by root as far as os.access says, but nothing can be made there.
        "under /proc": Path("/proc/sonic-deploy-test/out"),
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
    "huge requests": _encoded(summary_json([summary_level(4, requests=10**30, ok=10**30)])),
    "level not an object": _encoded(summary_json([summary_level(2), "level"])),
    "target not an object": _encoded({**_VALID, "target": "x"}),
    "client without host": _encoded({**_VALID, "client": {}}),
    # Keys the readers index (probe/report.py, planner/probe_summary.py): missing, not a KeyError there.
    "rate missing": _encoded(summary_json([{k: v for k, v in summary_level(4).items() if k != "rate"}])),
    "p50 missing": _encoded(summary_json([{**summary_level(4), "ttfa_ms": {"p95": 120.0, "p99": 130.0}}])),
    "last piece p95 missing": _encoded(
        summary_json([{**summary_level(4), "ttfa_last_piece_ms": {"p50": 1.0, "p99": 2.0}}])
    ),
    "errors do not add up": _encoded(
        summary_json([{**summary_level(4, requests=2, ok=1), "errors": {"429": 2, "500": 2}}])
    ),
    "duplicate level": _encoded(summary_json([summary_level(4), summary_level(4)])),
    "negative foreign messages": _encoded(summary_json([{**summary_level(4), "foreign_messages": -1}])),
    "slo answer not a level": _encoded(
        {**_VALID, "slo": {"spec": "ttfa_p95<=250ms", "finished": True, "max_concurrency": 64}}
    ),
}


# --- generators: every option of a command, read from its parser -----------------------------------------


# Text a hostile user types: control characters, newlines, quotes, unicode, very long; no NUL (argv cannot
# hold one).
_TEXT = st.text(st.characters(exclude_characters="\0", exclude_categories=["Cs"]), max_size=40)
_NUMBER_TEXT = st.one_of(
    st.integers(-(10**12), 10**12).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "inf", "-inf", "1e308", "-0", "1_0", "0x1f", " 1", "1\n"]),
)


def subparser(parser: argparse.ArgumentParser, path: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of `path` under `parser`, e.g. ("probe", "ws")."""
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """Every option the command takes (not --help, not positionals, not sub-commands)."""
    return [
        action
        for action in parser._actions
        if action.option_strings and not isinstance(action, argparse._HelpAction | argparse._VersionAction)
    ]


def values(action: argparse.Action, paths: dict[str, Path]) -> st.SearchStrategy[list[str]]:
    """What to put after one option on the command line: its flag alone, or the flag and a value."""
    flag = action.option_strings[-1]
    if action.nargs == 0:
        return st.just([flag])
    hostile = st.one_of(
        st.sampled_from(HOSTILE_NUMBERS),
        st.sampled_from(HOSTILE_URLS),
        st.sampled_from([str(path) for path in paths.values()]),
        _NUMBER_TEXT,
        _TEXT,
    )
    if action.choices:
        hostile = st.one_of(st.sampled_from([str(choice) for choice in action.choices]), hostile)
    count = 2 if action.nargs in ("+", "*") else 1
    return st.lists(hostile, min_size=1, max_size=count).map(lambda given: [flag, *given])


def command_lines(
    parser: argparse.ArgumentParser, paths: dict[str, Path], most: int = 3
) -> st.SearchStrategy[tuple[list[str], list[str]]]:
    """(the fuzzed options' flags, the arguments): 1 to `most` of the parser's options with hostile values."""
    chosen = st.lists(st.sampled_from(options(parser)), min_size=1, max_size=most, unique_by=id)
    return chosen.flatmap(
        lambda actions: st.tuples(*(values(action, paths) for action in actions)).map(
            lambda parts: ([part[0] for part in parts], [word for part in parts for word in part])
        )
    )
