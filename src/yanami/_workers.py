"""Worker processes leave Ctrl-C to the process that started them.

A terminal's Ctrl-C reaches every process of the foreground group, worker processes
included; a worker that took it would print its own traceback while the parent stops the
pool and says, in one line, what was kept. Every pool yanami starts runs `quiet_worker` in
each worker first.
"""

from __future__ import annotations

import signal


def quiet_worker() -> None:
    """Pool initializer: ignore SIGINT here (the parent stops the pool and cleans up)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
