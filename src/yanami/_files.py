"""Writing files so that a reader never sees half of one: the one place that knows how.

Every file yanami writes whole (a manifest, a report, a calibration, a JSON summary) goes
through `atomic_write`: the bytes go to a hidden temporary file beside the target, are
flushed to disk, and the temporary file is renamed over the target. A crash or Ctrl-C at
any moment leaves either the old file or the new one, never a mix. ``-`` as a path means
standard output where a command allows it (`is_stdout`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from pathlib import Path

from yanami.errors import UserError

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
