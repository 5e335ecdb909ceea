"""Writing files so that a reader never sees half of one: the one place that knows how.

Every file yanami writes whole (a manifest, a report, a calibration, a JSON summary) goes
through `atomic_write`: the bytes go to a hidden temporary file beside the target, are
flushed to disk, and the temporary file is renamed over the target. A crash or Ctrl-C at
any moment leaves either the old file or the new one, never a mix. ``-`` as a path means
standard output where a command allows it (`is_stdout`).

Every file yanami reads from a user's source goes through `open_regular` (or `read_regular`):
only a regular file is read, so a FIFO, a device or a socket planted in a source is an error of
that file, never a command that hangs. A path a source names in its text (a JSON field) is checked
with `path_problem` before it is used: a NUL byte or a lone surrogate names no file, and would make
the call that opens it raise ValueError or UnicodeEncodeError instead of OSError.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
import sys
import threading
from pathlib import Path

from yanami.core._errors import UserError


def path_problem(name: str) -> str | None:
    """Why the text ``name`` (a path a source names, as read from its JSON) can name no file, in a
    few words; None when it can. A NUL byte ends a path where the system reads it; a lone surrogate
    (JSON's escape ``\\ud800``, half of a character) is not text a file name can be written in."""
    nul = name.find("\0")
    if nul >= 0:
        return f"a NUL byte at position {nul}"
    try:
        name.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a lone surrogate {name[exc.start]!r} at position {exc.start} (not text)"
    return None


def open_regular(path: str | Path, flags: int = os.O_RDONLY) -> int:
    """A descriptor reading ``path`` (``flags``: add ``O_NOFOLLOW`` to refuse a link), only where
    it is a regular file, else ``OSError`` ("not a regular file").

    It is opened without blocking (a FIFO with no writer blocks an ordinary open forever),
    checked with fstat, then set to block again."""
    fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, a device or a socket)", str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | Path, max_bytes: int | None = None) -> bytes:
    """The bytes of the regular file ``path`` (`open_regular`); over ``max_bytes``, ``OSError``."""
    with open(open_regular(path), "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if max_bytes is not None and size > max_bytes:
            raise OSError(errno.EFBIG, f"{size} bytes is over the limit of {max_bytes}", str(path))
        data = f.read() if max_bytes is None else f.read(max_bytes + 1)  # it may have grown since
    if max_bytes is not None and len(data) > max_bytes:
        raise OSError(errno.EFBIG, f"over the limit of {max_bytes} bytes", str(path))
    return data


STDOUT = "-"
"""The path that means standard output."""


def is_stdout(path: str | Path | None) -> bool:
    """Whether a user-given path means standard output (``-``)."""
    return path is not None and str(path) == STDOUT


def atomic_write(path: str | Path, data: bytes | str, *, fsync: bool = True) -> Path:
    """Write ``data`` to ``path`` through a temporary file and a rename; returns the path.

    Text is written as UTF-8 with ``\\n`` line ends. The parent folder must exist: a missing
    one is a `UserError` naming it (yanami never creates folders the user did not name).
    """
    target = Path(path)
    parent = target.parent
    if not parent.is_dir():
        raise UserError(f"{target}: the folder {parent} does not exist")
    raw = data.encode("utf-8") if isinstance(data, str) else data
    tmp = parent / f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(raw)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return target


def write_output(path: str | Path, text: str) -> None:
    """Write a command's text output to ``path`` atomically, or to standard output for ``-``."""
    if is_stdout(path):
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
        return
    try:
        atomic_write(path, text)
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory; give a file name") from None
    except PermissionError:
        raise UserError(f"{path}: permission denied") from None


def sha256_hex(data: bytes) -> str:
    """Lower-case hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()
