"""One yanami process at a time in a directory it writes: an exclusive lock on ``DIR/.lock``.

`yanami eval` and `yanami judge` hold it on the run directory, `yanami prepare` on its
``--out`` and `yanami construct` on its store (``OUT.construct/``), for as long as they write;
a second process on the same directory stops at once with one line naming the holder's
process id, before it writes or asks a model anything. A command that makes a new directory
(`build`, `import`, `export`, the dataset `construct` writes) locks its name before it exists
(`OutputLock`: ``.NAME.lock`` beside it, where its work directory is too). The operating system drops the lock
when its holder ends, however it ends (``kill -9`` included), so a stale lock never needs
clearing. Readers (`score`, `report`) do not lock.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from yanami.contract import UserError

LOCK = ".lock"
"""The lock file in a locked directory (it holds the process id of the last holder)."""


class DirLock:
    """The lock on one directory, held until `release` (or the end of a ``with`` block)."""

    def __init__(self, run: Path, *, file: Path | None = None) -> None:
        """``file``: the lock file, where it is not ``run/.lock``."""
        self.run = run
        self._fd: int | None = None
        fd = os.open(file if file is not None else run / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
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


def work_prefix(out: Path) -> str:
    """The name every work directory of a new ``out`` starts with (a hidden sibling)."""
    return f".{out.name}.tmp-"


class OutputLock(DirLock):
    """The lock on a directory a command is about to make, ``out``: ``.NAME.lock`` beside it,
    removed again when released, so a finished command leaves nothing beside its output.

    Whoever holds it is the only writer of ``out``, so every work directory of ``out`` that is
    still there (``.NAME.tmp-*``, left by a command that was killed) is removed as it is taken.
    """

    def __init__(self, out: Path) -> None:
        parent = out.absolute().parent
        self.file = parent / f".{out.name}.lock"
        while True:
            super().__init__(out, file=self.file)
            assert self._fd is not None
            try:
                if os.stat(self.file).st_ino == os.fstat(self._fd).st_ino:
                    break
            except FileNotFoundError:
                pass
            # the holder removed the file as it let go, after this process opened it: the lock
            # taken is on a file no other process can find; take the one at the path instead
            DirLock.release(self)
        for stale in parent.glob(glob_escape(work_prefix(out)) + "*"):
            shutil.rmtree(stale, ignore_errors=True)

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.file)  # still held: whoever opens the path next makes a new file
        super().release()


def glob_escape(text: str) -> str:
    """``text`` matched literally by `Path.glob`."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


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
