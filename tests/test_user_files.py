"""Files a user names, read safely: only a regular file is read (a FIFO is refused without blocking, a folder
or a link loop without raising), and a file past the limit is refused from its size, not read into memory;
the commands that take such files say so in one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sonic_deploy.cli import main
from sonic_deploy.licence.command import LicenceError, read_licence
from sonic_deploy.turn.caller_audio import MAX_WAV_BYTES, CallerAudioError, read_wav
from sonic_deploy.user_files import RefusedFileError, check_regular, read_regular

EIGHT_GIB = 8 * 2**30


def sparse(path: Path, size: int) -> Path:
    """A file of `size` bytes that takes no disk (and is never read by the code under test)."""
    with path.open("wb") as file:
        file.truncate(size)
    return path


def shapes(tmp_path: Path) -> dict[str, Path]:
    fifo, loop, folder = tmp_path / "fifo", tmp_path / "loop", tmp_path / "folder"
    os.mkfifo(fifo)
    loop.symlink_to(loop.name)
    folder.mkdir()
    return {"fifo": fifo, "loop": loop, "folder": folder, "huge": sparse(tmp_path / "huge", EIGHT_GIB)}


@pytest.mark.parametrize(
    ("shape", "problem"),
    [
        ("fifo", "a named pipe (FIFO), not a file"),
        ("loop", "a symbolic link loop"),
        ("folder", "a directory, not a file"),
        ("huge", "8192 MiB, more than 1 MiB"),
    ],
)
def test_only_a_regular_file_within_the_limit_is_read(tmp_path: Path, shape: str, problem: str) -> None:
    path = shapes(tmp_path)[shape]
    for check in (lambda: read_regular(path, limit=2**20), lambda: check_regular(path, limit=2**20)):
        with pytest.raises(RefusedFileError) as refused:
            check()
        assert refused.value.problem == problem


def test_a_proc_file_that_says_size_0_stops_at_the_limit() -> None:
    """/proc files report size 0 and may be longer: the count, not the size, stops the read."""
    with pytest.raises(RefusedFileError, match="more than 16 bytes"):
        read_regular(Path("/proc/self/status"), limit=16)
    assert read_regular(Path("/proc/self/status"), limit=2**20).startswith(b"Name:")


def test_a_link_is_refused_where_links_are_not_followed(tmp_path: Path) -> None:
    (tmp_path / "target").write_bytes(b"x")
    (tmp_path / "link").symlink_to("target")
    assert read_regular(tmp_path / "link", limit=1) == b"x"
    with pytest.raises(RefusedFileError, match="a symbolic link, not a file"):
        read_regular(tmp_path / "link", limit=1, follow_symlinks=False)


@pytest.mark.parametrize("shape", ["fifo", "loop", "folder", "huge"])
def test_a_licence_that_is_not_a_small_regular_file(tmp_path: Path, shape: str) -> None:
    with pytest.raises(LicenceError) as refused:
        read_licence(shapes(tmp_path)[shape])
    assert "\n" not in str(refused.value) and "Fix: " in str(refused.value)


def test_a_wav_past_the_limit_is_refused_unread(tmp_path: Path) -> None:
    with pytest.raises(CallerAudioError, match=r"more than 64 MiB\)\. Fix: "):
        read_wav(sparse(tmp_path / "long.wav", MAX_WAV_BYTES + 1))


@pytest.mark.parametrize(
    "command",
    [
        ["licence", "upload", "--env", "dev", "--file"],
        ["probe", "turn", "--url", "ws://127.0.0.1:9", "--wav"],
    ],
)
def test_an_8_gib_file_is_refused_when_parsed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    huge = sparse(tmp_path / "huge", EIGHT_GIB)
    with pytest.raises(SystemExit) as exited:
        main([*command, str(huge)])
    assert exited.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    assert f"'{huge}': 8192 MiB, larger than " in line and "Fix: " in line, line
    assert "larger than 64 MiB" in line


@pytest.mark.parametrize("out", ["/proc/sonic-run", "/sys/sonic-run"])
@pytest.mark.parametrize("route", ["ws", "http"])
def test_probe_out_where_nothing_can_be_written(
    capsys: pytest.CaptureFixture[str], out: str, route: str
) -> None:
    if not Path(out).parent.is_dir():
        pytest.skip(f"no {Path(out).parent} here")
    url = "ws://127.0.0.1:9/tts" if route == "ws" else "http://127.0.0.1:9"
    assert main(["probe", route, "--url", url, "--api-key", "x", "--out", out, "--requests", "1"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"sonic-deploy probe {route}: --out '{out}': cannot write the run there ("), line
    assert "Fix: " in line
