"""The shared argument types (sonic_deploy/arguments.py), one rule at a time, and the one-line parser."""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sonic_deploy.arguments import (
    ACCOUNT_ID,
    ENDPOINT_NAME,
    REGION_NAME,
    OneLineParser,
    input_file,
    listed,
    option_message,
    output_file,
    output_folder,
    real,
    url,
    whole,
    write_output,
)
from sonic_deploy.config import ConfigError
from sonic_deploy.config.errors import one_line
from tests.fuzz.arguments import HOSTILE_NUMBERS, HOSTILE_URLS, hostile_paths

SECONDS = real(0, 3600, "seconds", low_open=True)
COUNT = whole(1, 1000, "requests")


def refused(parse: Callable[[str], Any], text: str) -> str:
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        parse(text)
    message = str(caught.value)
    assert message.isprintable() and "Fix: give " in message, message
    return message


@pytest.mark.parametrize("text", [t for t in HOSTILE_NUMBERS if t != "0x10"] + ["3600.5", "0x10"])
def test_a_number_is_finite_and_in_its_range(text: str) -> None:
    assert one_line(repr(text)) in refused(SECONDS, text)


@pytest.mark.parametrize(("text", "value"), [("0.5", 0.5), ("3600", 3600.0), ("1e3", 1000.0), (" 2 ", 2.0)])
def test_numbers_in_range_are_taken(text: str, value: float) -> None:
    assert SECONDS(text) == value


@pytest.mark.parametrize("text", ["0", "1001", "1.5", "1e3", "nan", "", "9" * 40, "٣", "True"])
def test_a_whole_number_is_digits_in_its_range(text: str) -> None:
    refused(COUNT, text)


def test_a_list_takes_each_item_by_its_rule() -> None:
    levels = listed(COUNT, "levels")
    assert levels("1, 2,4") == [1, 2, 4]
    assert "'0'" in refused(levels, "1,0")
    assert "no value" in refused(levels, ",")


@pytest.mark.parametrize("text", HOSTILE_URLS)
def test_a_url_has_its_scheme_a_host_and_a_port(text: str) -> None:
    refused(url("ws", "wss", example="ws://HOST:PORT/tts/websocket"), text)


@pytest.mark.parametrize(
    "text", ["ws://127.0.0.1:8080/tts/websocket", "wss://api.example.com", "ws://[::1]:80/x"]
)
def test_good_urls_are_taken_unchanged(text: str) -> None:
    assert url("ws", "wss", example="ws://HOST")(text) == text


def test_a_url_of_another_scheme_names_the_right_one() -> None:
    assert "the scheme must be ws:// or wss://" in refused(url("ws", "wss", example="ws://H"), "http://h/x")


@pytest.mark.parametrize(
    ("rule", "good", "bad"),
    [
        (REGION_NAME, "us-east-2", "us-east-2\n"),
        (ENDPOINT_NAME, "sonic-dev", "sonic_dev"),
        (ENDPOINT_NAME, "a" * 63, "a" * 64),
        (ACCOUNT_ID, "123456789012", "12345678901"),
    ],
)
def test_aws_names_fully_match(rule: Callable[[str], str], good: str, bad: str) -> None:
    assert rule(good) == good
    refused(rule, bad)


@pytest.mark.parametrize("kind", ["missing", "empty", "binary", "a directory", "unwritable"])
def test_a_file_to_read_is_there_and_text(kind: str, tmp_path: Path) -> None:
    path = hostile_paths(tmp_path)[kind]
    problem = refused(input_file("transcripts"), str(path))
    assert problem.startswith(repr(str(path)))


def test_a_binary_file_is_read_when_that_is_its_kind(tmp_path: Path) -> None:
    path = hostile_paths(tmp_path)["binary"]
    assert input_file("a WAV file", text=False)(str(path)) == path
    refused(input_file("a WAV file", text=False), str(hostile_paths(tmp_path)["empty"]))
    assert input_file("a log", text=False, empty=True)(str(tmp_path / "empty")) == tmp_path / "empty"


def test_not_utf8_text_is_refused(tmp_path: Path) -> None:
    (tmp_path / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    assert "not UTF-8 text" in refused(input_file("transcripts"), str(tmp_path / "latin1.txt"))


@pytest.mark.parametrize("kind", ["a directory", "unwritable"])
def test_a_file_to_write_is_no_folder_and_in_a_folder(kind: str, tmp_path: Path) -> None:
    refused(output_file("the plot"), str(hostile_paths(tmp_path)[kind]))


def test_a_file_to_write_may_be_new_in_a_new_folder(tmp_path: Path) -> None:
    assert output_file("the plot")(str(tmp_path / "new" / "c.png")) == tmp_path / "new" / "c.png"
    assert output_file("the plot")("c.png") == Path("c.png")


@pytest.mark.parametrize("kind", ["empty", "unwritable"])
def test_a_folder_to_write_is_no_file(kind: str, tmp_path: Path) -> None:
    refused(output_folder("the run"), str(hostile_paths(tmp_path)[kind]))


def test_shown_escapes_what_would_break_the_line() -> None:
    assert one_line("a\nb\tc\x1b[31m\u2028d") == "a\\nb\\tc\\x1b[31m\\u2028d"
    assert one_line("café") == "café"


def _error(parser: argparse.ArgumentParser, argv: list[str]) -> str:
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), pytest.raises(SystemExit) as stopped:
        parser.parse_args(argv)
    assert stopped.value.code == 2
    (line,) = stderr.getvalue().splitlines()
    return line


def test_argparse_own_errors_are_one_line_with_the_option_and_a_fix() -> None:
    parser = OneLineParser(prog="tool")
    parser.add_argument("--mode", choices=("a", "b"))
    parser.add_argument("--need", required=True)
    parser.add_argument("--count", type=COUNT)
    assert _error(parser, ["--need", "x", "--mode", "c"]) == (
        "tool: --mode invalid choice: 'c' (choose from 'a', 'b'). Fix: give one of those"
    )
    assert _error(parser, []) == "tool: the following arguments are required: --need. Fix: see `tool --help`"
    assert _error(parser, ["--need", "x", "--bogus\nline"]) == (
        "tool: unrecognized arguments: --bogus\\nline. Fix: see `tool --help`"
    )
    assert _error(parser, ["--need", "x", "--count", "0\n"]) == (
        "tool: --count '0\\n': not a whole number. Fix: give requests, from 1 to 1000"
    )


def test_subcommands_inherit_the_one_line_parser() -> None:
    parser = OneLineParser(prog="tool")
    sub = parser.add_subparsers(dest="command", required=True).add_parser("run")
    sub.add_argument("--rate", type=SECONDS)
    assert _error(parser, ["run", "--rate", "nan"]) == (
        "tool run: --rate 'nan': not a finite number. Fix: give seconds, more than 0 up to 3600"
    )


def test_write_output_makes_the_folder_and_names_the_option_when_it_cannot(tmp_path: Path) -> None:
    """output_file allows a folder that does not exist yet: the writer makes it (before: FileNotFoundError)."""
    made = tmp_path / "new" / "deeper" / "out.txt"
    write_output(made, "--markdown", lambda path: path.write_text("x"))
    assert made.read_text() == "x"
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ConfigError) as refused:
        write_output(tmp_path / "a-file" / "out.png", "--png", lambda path: path.write_text("x"))
    line = option_message(refused.value)
    assert line.startswith(f"--png '{tmp_path}/a-file/out.png': cannot write it (") and "Fix: give" in line
