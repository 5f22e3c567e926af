"""What every command's arguments may be: the parser that reports a mistake in one line (exit 2), and the
argparse `type=` checks for numbers, URLs and paths, shared by every command so that none has its own copy.
Never imports aws_cdk (the operator tools run on hosts without it)."""

from __future__ import annotations

import argparse
import math
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit

from sonic_deploy.config import ConfigError
from sonic_deploy.config.errors import one_line, show
from sonic_deploy.config.loader import ENVIRONMENT_NAME, ENVIRONMENTS_DIR
from sonic_deploy.config.regions import check_region
from sonic_deploy.user_files import size_text

# What one client host can drive, and what the probe therefore writes and reads back (probe compare,
# plan --probe): beyond these a run is a typo (1e9 requests/s schedules arrivals faster than it can send
# them and runs away), not a measurement.
MAX_CONCURRENCY = 10_000
MAX_RATE = 10_000.0
MAX_REQUESTS = 10_000_000
MAX_SECONDS = 7 * 24 * 3600.0
MAX_MS = 3600_000.0
# A text input (transcripts, a budget, a summary) larger than this is not one of ours.
MAX_TEXT_BYTES = 64 * 1024 * 1024


class OneLineParser(argparse.ArgumentParser):
    """argparse's usage errors in one line, `PROG: --OPTION 'VALUE': PROBLEM. Fix: ...`, exit 2; the
    subparsers of a parser of this class are of it too (argparse's parser_class default)."""

    def error(self, message: str) -> NoReturn:
        text = re.sub(r"^argument ([^:]+): ", r"\1 ", message)
        if "invalid choice" in text:
            text += ". Fix: give one of those"
        elif "Fix:" not in text:
            text += f". Fix: see `{self.prog} --help`"
        self.exit(2, f"{self.prog}: {one_line(text)}\n")


def fail(text: str, problem: str, fix: str) -> NoReturn:
    raise argparse.ArgumentTypeError(f"{one_line(repr(text))}: {problem}. Fix: {fix}")


# What a command finds wrong with an option after parsing (a ConfigError of file "command line") is shown as
# argparse shows a bad value: `--OPTION VALUE: PROBLEM. Fix: FIX`.
COMMAND_LINE = "command line"


def option_message(error: ConfigError) -> str:
    """`error` as one line; an option's (file "command line") in the form argparse's errors have."""
    if error.file == COMMAND_LINE:
        return one_line(f"{error.field} {show(error.value)}: {error.problem}. Fix: {error.fix}")
    return one_line(str(error))


def write_output(path: Path, option: str, write: Callable[[Path], object]) -> None:
    """`write(path)` after making its folder (output_file allows one that does not exist yet); a file that
    cannot be written is a ConfigError naming the option, never a traceback."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path)
    except OSError as error:
        raise ConfigError(
            file=COMMAND_LINE,
            field=option,
            value=str(path),
            problem=f"cannot write it ({error.strerror or error})",
            fix="give a path in a folder you may write in",
        ) from None


def _span(low: float, high: float, low_open: bool) -> str:
    return f"{'more than' if low_open else 'from'} {low:g} {'up to' if low_open else 'to'} {high:g}"


def real(low: float, high: float, what: str, *, low_open: bool = False) -> Callable[[str], float]:
    """A finite number in [low, high] (or (low, high] with `low_open`); nan, inf and 1e308 are refused."""

    def parse(text: str) -> float:
        try:
            if not text.isprintable():  # "1\n": a value pasted with its line's end is a mistake
                raise ValueError(text)
            value = float(text)
        except ValueError:
            fail(text, "not a number", f"give {what}, {_span(low, high, low_open)}")
        if not math.isfinite(value):
            fail(text, "not a finite number", f"give {what}, {_span(low, high, low_open)}")
        if value < low or value > high or (low_open and value == low):
            fail(text, "out of range", f"give {what}, {_span(low, high, low_open)}")
        return value

    parse.__name__ = "number"
    return parse


def whole(low: int, high: int, what: str) -> Callable[[str], int]:
    """A whole number in [low, high] (decimal digits, an optional sign)."""

    def parse(text: str) -> int:
        if not re.fullmatch(r" *[+-]?[0-9]{1,19} *", text):
            fail(text, "not a whole number", f"give {what}, from {low} to {high}")
        value = int(text)
        if not low <= value <= high:
            fail(text, "out of range", f"give {what}, from {low} to {high}")
        return value

    parse.__name__ = "whole number"
    return parse


def listed(item: Callable[[str], float], what: str) -> Callable[[str], list[float]]:
    """Comma-separated values of `item`, at least one."""

    def parse(text: str) -> list[float]:
        parts = [part.strip() for part in text.split(",") if part.strip()]
        if not parts:
            fail(text, "no value", f"give {what}, comma-separated, e.g. 1,2,4")
        return [item(part) for part in parts]

    parse.__name__ = "list"
    return parse


def url(*schemes: str, example: str) -> Callable[[str], str]:
    """A URL with one of `schemes`, a host, and a port (when given) from 1 to 65535; returned unchanged."""

    def parse(text: str) -> str:
        fix = f"give a URL such as {example}"
        if not text.isprintable() or any(c.isspace() for c in text):
            fail(text, "a URL holds no spaces or control characters", fix)
        try:
            parts = urlsplit(text)
            port = parts.port  # ValueError when not a number or out of 0-65535
        except ValueError:
            fail(text, "not a URL (its host or port cannot be read)", fix)
        if parts.scheme.lower() not in schemes:
            fail(text, f"the scheme must be {' or '.join(s + '://' for s in schemes)}", fix)
        if not parts.hostname:
            fail(text, "no host", fix)
        if port == 0:
            fail(text, "port 0 is no port to connect to", fix)
        return text

    parse.__name__ = "URL"
    return parse


def name(pattern: str, what: str, example: str) -> Callable[[str], str]:
    """Text that fully matches `pattern` (fullmatch: a trailing newline does not slip through)."""
    compiled = re.compile(pattern)

    def parse(text: str) -> str:
        if not compiled.fullmatch(text):
            fail(text, f"not {what}", f"give {what}, e.g. {example}")
        return text

    parse.__name__ = "name"
    return parse


# SageMaker's EndpointName: 1-63 letters, digits and inner hyphens
# (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_EndpointInfo.html, "Pattern").
ENDPOINT_NAME = name(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}", "a SageMaker endpoint name", "sonic-dev")


def REGION_NAME(text: str) -> str:  # noqa: N802 (an argparse type, named like the others)
    """An AWS Region that exists (config/regions.py `check_region`, the config's own rule)."""
    found = check_region(text)
    if found is not None:
        problem, fix = found
        fail(text, problem, f"give an AWS Region ({fix})")
    return text


REGION_NAME.__name__ = "Region"
# Sent as an HTTP header: a newline or a control character would be refused by the client, or split it.
HEADER_VALUE = name(r"[!-~]*", "visible ASCII without spaces (an HTTP header value)", "2025-04-16")
# Text the API takes as an identifier (a voice, a model): an empty one is a mistake, not a default.
IDENTIFIER = name(r"[!-~]+", "an identifier (visible ASCII, no spaces)", "sonic-2")
SECRET_PROBLEM = "has a space, a control character or a non-ASCII character (an HTTP header cannot carry it)"


def secret(option: str, variable: str) -> Callable[[str], str]:
    """A key sent as an HTTP header: checked like HEADER_VALUE, but its value is never shown (it is a
    secret), and the message names both the option and the variable it may come from."""

    def parse(text: str) -> str:
        if re.fullmatch(r"[!-~]*", text) is None:
            raise argparse.ArgumentTypeError(
                f"the value of {option} (or ${variable}) {SECRET_PROBLEM}. Fix: set it to the key alone, "
                "without spaces or a line end"
            )
        return text

    parse.__name__ = "secret"
    return parse


# An AWS account ID is 12 digits (https://docs.aws.amazon.com/accounts/latest/reference/manage-acct-identifiers.html).
ACCOUNT_ID = name(r"[0-9]{12}", "a 12-digit AWS account ID", "123456789012")
# The loader's own rule (it names stacks, repositories, the endpoint): an empty --env is a mistake, not dev.
ENVIRONMENT = name(ENVIRONMENT_NAME.pattern, "an environment name (config/environments/NAME.toml)", "dev")


def config_folder(given: str) -> Path:
    """sonic-deploy's config/ folder: one with an environments/ folder in it."""
    path = Path(given)
    if not (path / ENVIRONMENTS_DIR).is_dir():
        problem = "no such folder" if not path.exists() else f"no {ENVIRONMENTS_DIR}/ folder in it"
        fail(
            given, problem, "run from the repository root, or give the path of sonic-deploy's config/ folder"
        )
    return path


def input_file(
    what: str, *, text: bool = True, empty: bool = False, largest: int = MAX_TEXT_BYTES
) -> Callable[[str], Path]:
    """A file to read: there, a regular file of at most `largest` bytes (checked from its size: an 8 GiB
    file is not read into memory), not empty (unless `empty`); with `text`, UTF-8 without NUL bytes."""

    def parse(given: str) -> Path:
        path = Path(given)
        fix = f"give the path of {what}"
        if not given:
            fail(given, "no path", fix)
        try:
            mode = path.stat().st_mode
        except OSError as error:
            fail(given, f"cannot read it ({error.strerror or error})", fix)
        if stat.S_ISDIR(mode):
            fail(given, "a directory, not a file", fix)
        # A FIFO would block the parse until a writer comes, /dev/zero would be read to the limit: only a
        # regular file is opened.
        if not stat.S_ISREG(mode):
            fail(given, "not a regular file (a pipe, a device or a socket)", fix)
        if path.stat().st_size > largest:
            fail(given, f"{size_text(path.stat().st_size)}, larger than {size_text(largest)}", fix)
        try:
            with path.open("rb") as opened:
                head = opened.read(largest + 1 if text else 1)
        except OSError as error:
            fail(given, f"cannot read it ({error.strerror or error})", fix)
        if not head and not empty:
            fail(given, "the file is empty", fix)
        if text:
            if len(head) > largest:
                fail(given, f"larger than {size_text(largest)}", fix)
            if b"\0" in head:
                fail(given, "a binary file, not text", fix)
            try:
                head.decode("utf-8")
            except UnicodeDecodeError:
                fail(given, "not UTF-8 text", fix)
        return path

    parse.__name__ = "file"
    return parse


def _writable_folder(given: str, folder: Path, fix: str) -> None:
    """The nearest folder that exists at or above `folder` is a folder this process may write in."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        fail(given, f"{one_line(str(existing))} is a file, not a folder", fix)
    if not os.access(existing, os.W_OK | os.X_OK):
        fail(given, f"cannot write in {one_line(str(existing))}", fix)


def output_file(what: str) -> Callable[[str], Path]:
    """A file to write: not a folder, in a folder that exists (or can be made) and is writable."""

    def parse(given: str) -> Path:
        path = Path(given)
        fix = f"give a path to write {what} to"
        if not given or given.endswith(("/", os.sep)):
            fail(given, "no file name", fix)
        if path.is_dir():
            fail(given, "a folder, not a file", fix)
        _writable_folder(given, path.parent if str(path.parent) else Path(), fix)
        return path

    parse.__name__ = "output file"
    return parse


def output_folder(what: str) -> Callable[[str], Path]:
    """A folder to write into: a folder or nothing yet, under a writable folder."""

    def parse(given: str) -> Path:
        path = Path(given)
        fix = f"give a folder for {what}"
        if not given:
            fail(given, "no path", fix)
        if path.exists() and not path.is_dir():
            fail(given, "a file, not a folder", fix)
        _writable_folder(given, path, fix)
        return path

    parse.__name__ = "output folder"
    return parse
