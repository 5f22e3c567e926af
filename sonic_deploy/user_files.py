"""Reading a file a user named (or a folder a user may have edited) without hanging or running out of memory:
only a regular file is read, a FIFO, a device, a socket or a directory is refused before any read, and a
file larger than the caller's limit is refused from its size, not by reading it. Each refusal is a
`RefusedFileError` whose text is one line the caller puts into its own house error."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

MIB = 2**20


class RefusedFileError(Exception):
    """A file that is not read: `problem` says why, in a few words (no path, no fix: the caller adds both)."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


def kind_of(mode: int) -> str:
    """What a non-regular file is, as a user would say it."""
    if stat.S_ISDIR(mode):
        return "a directory, not a file"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO), not a file"
    if stat.S_ISLNK(mode):
        return "a symbolic link, not a file"
    if stat.S_ISSOCK(mode):
        return "a socket, not a file"
    return "a device, not a file"


def size_text(size: int) -> str:
    return f"{size / MIB:.0f} MiB" if size >= MIB else f"{size} bytes"


def _open(path: Path, *, follow_symlinks: bool) -> int:
    # O_NONBLOCK: opening a FIFO with no writer would wait for one; the fstat below refuses it instead.
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        return os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ELOOP:
            problem = "a symbolic link loop" if follow_symlinks else "a symbolic link, not a file"
            raise RefusedFileError(path, problem) from None
        if error.errno == errno.EISDIR:
            raise RefusedFileError(path, "a directory, not a file") from None
        raise RefusedFileError(path, error.strerror or str(error)) from None


def read_chunks(path: Path, *, limit: int, follow_symlinks: bool = True) -> Iterator[bytes]:
    """The bytes of `path`, a regular file of at most `limit` bytes, a MiB at a time; RefusedFileError
    before the first chunk for anything else (and after the limit for a file that grows while read)."""
    handle = _open(path, follow_symlinks=follow_symlinks)
    try:
        status = os.fstat(handle)
        if not stat.S_ISREG(status.st_mode):
            raise RefusedFileError(path, kind_of(status.st_mode))
        if status.st_size > limit:
            raise RefusedFileError(path, f"{size_text(status.st_size)}, more than {size_text(limit)}")
        os.set_blocking(handle, True)
        total = 0
        while chunk := os.read(handle, MIB):  # a /proc file says size 0: the count below stops it
            total += len(chunk)
            if total > limit:
                raise RefusedFileError(path, f"more than {size_text(limit)}")
            yield chunk
    except OSError as error:
        raise RefusedFileError(path, error.strerror or str(error)) from None
    finally:
        os.close(handle)


def read_regular(path: Path, *, limit: int, follow_symlinks: bool = True) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes, or RefusedFileError."""
    return b"".join(read_chunks(path, limit=limit, follow_symlinks=follow_symlinks))


def check_regular(path: Path, *, limit: int | None = None) -> int:
    """The size of `path` if it is a regular file (symbolic links followed) of at most `limit` bytes, else
    RefusedFileError; nothing is opened, so a FIFO cannot block."""
    try:
        status = path.stat()
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise RefusedFileError(path, "a symbolic link loop") from None
        raise RefusedFileError(path, error.strerror or str(error)) from None
    if not stat.S_ISREG(status.st_mode):
        raise RefusedFileError(path, kind_of(status.st_mode))
    if limit is not None and status.st_size > limit:
        raise RefusedFileError(path, f"{size_text(status.st_size)}, more than {size_text(limit)}")
    return status.st_size
