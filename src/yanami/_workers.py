"""Worker processes leave Ctrl-C to the process that started them.

A terminal's Ctrl-C reaches every process of the foreground group, worker processes
included; a worker that took it would print its own traceback (and break its pool) while
the parent stops the pool and says, in one line, what was kept. Every pool yanami starts
starts its processes inside `starting_workers` and runs `quiet_worker` in each one first.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager

_MASKS = hasattr(signal, "pthread_sigmask")  # POSIX


@contextmanager
def starting_workers() -> Iterator[None]:
    """Start worker processes inside this block: they hold Ctrl-C from their first instruction.

    A new process inherits its starter's signal mask across fork and exec (the forkserver,
    and so each process it forks, too), so SIGINT stays blocked in a new worker until
    `quiet_worker` ignores it: a Ctrl-C while a worker still imports its modules is never
    its traceback. In the starting thread a Ctrl-C waits for the end of the block (the
    process's other threads take it at once).
    """
    if not _MASKS:
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def quiet_worker() -> None:
    """Pool initializer: ignore SIGINT here (the parent stops the pool and cleans up)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if _MASKS:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
