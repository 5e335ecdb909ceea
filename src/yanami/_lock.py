"""One yanami process at a time in a directory it writes: an exclusive lock on ``DIR/.lock``.

`yanami eval` and `yanami judge` hold it on the run directory, `yanami prepare` on its
``--out`` and `yanami construct` on its store (``OUT.construct/``), for as long as they write;
a second process on the same directory stops at once with one line naming the holder's
process id, before it writes or asks a model anything. The operating system drops the lock
when its holder ends, however it ends (``kill -9`` included), so a stale lock never needs
clearing. Readers (`score`, `report`) do not lock.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from yanami.errors import UserError

LOCK = ".lock"
"""The lock file in a locked directory (it holds the process id of the last holder)."""


class DirLock:
    """The lock on one directory, held until `release` (or the end of a ``with`` block)."""

    def __init__(self, run: Path) -> None:
        self.run = run
        self._fd: int | None = None
        fd = os.open(run / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if not _try_lock(fd):
                raise UserError(f"{run} is in use by another yanami process (pid {_holder(fd)})")
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Let another process have the run (the lock file stays: removing it would race)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the descriptor drops the lock

    def __enter__(self) -> DirLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        return str(int(os.pread(fd, 32, 0).decode("ascii").strip()))
    return "unknown"


def _try_lock(fd: int) -> bool:
    import fcntl  # POSIX, as is the rest of yanami's process handling (the forkserver)

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True
