"""An endpoint's request starts shared by every process of a cluster, taken a few at a time.

The cluster keeps one schedule per endpoint (`_ray._Limits.take`): starts ``interval`` apart,
each handed to one process, as `yanami.models.Endpoint` spaces them in one process. A process
asks for the starts its waiting requests need plus those it expects in the next `HORIZON_S`
(from its last second), so a busy process asks a few times a second, not once a request, and a
process that idles holds none: any process can use what the others leave. A start not used
within `HORIZON_S` of its time lapses, so the cluster never starts more than the budget plus
`HORIZON_S`' worth. Ray-free, so that it can be tested on its own.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

HORIZON_S = 0.25
"""How far ahead a process takes starts, and how late one may still be used."""

SPARE_MAX = 64
"""Starts a process takes ahead of its waiting requests, at most."""

Take = Callable[[int], tuple[float, int, str | None]]
"""n -> (the first start's delay from now, how many starts, ``interval`` apart; or why the
server refused this client, with no start)."""


class ClusterPace:
    """One process's starts from an endpoint's schedule for the whole cluster (``take``)."""

    def __init__(self, take: Take, interval: float) -> None:
        self.take, self.interval = take, interval
        self.starts: deque[float] = deque()
        """The starts this process holds, in this process's `time.monotonic`, earliest first."""
        self.used: deque[float] = deque()
        """When each start of the last second was handed to a request."""
        self.asked = 0
        """Calls of ``take`` so far."""
        self.lapsed = 0
        """Starts not used within `HORIZON_S` of their time."""
        self._cond = threading.Condition()
        self._waiting = 0
        self._taking = False

    def next_start(self) -> float | str:
        """The time (`time.monotonic`) at which a request may start, or why the server refused
        this client. One thread at a time asks the cluster, for every thread waiting."""
        with self._cond:
            self._waiting += 1
            try:
                while True:
                    now = time.monotonic()
                    while self.starts and self.starts[0] + HORIZON_S < now:
                        self.starts.popleft()
                        self.lapsed += 1
                    if self.starts:
                        self.used.append(now)
                        return self.starts.popleft()
                    if self._taking:
                        self._cond.wait()
                        continue
                    while self.used and self.used[0] < now - 1.0:
                        self.used.popleft()
                    want = self._waiting + min(SPARE_MAX, int(len(self.used) * HORIZON_S))
                    self._taking = True
                    self._cond.release()
                    try:
                        delay, n, stopped = self.take(want)
                        got = time.monotonic()  # the delay counts from the schedule's now: late here, never early
                    finally:
                        self._cond.acquire()
                        self._taking = False
                        self.asked += 1
                        self._cond.notify_all()
                    if stopped:
                        return stopped
                    self.starts.extend(got + delay + k * self.interval for k in range(n))
            finally:
                self._waiting -= 1


class Schedule:
    """The starts of one endpoint for the whole cluster, ``interval`` apart, each given once (the
    cluster's is in `_ray._Limits`, an actor); none before the time asked, so idle time is not saved up."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.next = time.monotonic()

    def take(self, n: int) -> tuple[float, int, str | None]:
        """``n`` starts: the first one's delay from now, ``n``, and no refusal."""
        now = time.monotonic()
        first = max(now, self.next)
        self.next = first + n * self.interval
        return first - now, n, None
