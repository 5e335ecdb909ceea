"""The items of every chain in flight, ``size`` at once: `ItemPool`.

A chain's target turns run one after another (each request shows the turns before it), but the
DSU questions that follow them depend on nothing but those turns, so a chain hands them over
together (`yanami.runner._chains.steps`). The pool's threads take the ready item of the chain
that started first: chains end in the order they started, and the chains opened after them
(the executor keeps more chains open than items in flight) only fill what the older ones leave
idle. So no request waits for a chain to end, and the run's last items are not one chain's
questions asked one by one while the other threads idle.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class _Job:
    run: Callable[[], Any]
    done: Future[Any]
    stop: threading.Event


_LAST = 1 << 62
"""The rank of the pool's end: after every item."""


class ItemPool:
    """``size`` threads running the items handed to them, the lowest ``rank`` (the chain that
    started first) first, then in the order they came. Use as a context manager: leaving it
    ends the threads after the items handed over (none is handed over after that)."""

    def __init__(self, size: int) -> None:
        self._jobs: queue.PriorityQueue[tuple[int, int, _Job | None]] = queue.PriorityQueue()
        self._order = itertools.count()
        self._threads = [threading.Thread(target=self._work, name=f"yanami-item-{k}", daemon=True) for k in range(size)]

    def __enter__(self) -> ItemPool:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for _ in self._threads:
            self._jobs.put((_LAST, next(self._order), None))
        for t in self._threads:
            t.join()

    def submit(self, rank: int, job: Callable[[], T], stop: threading.Event) -> Future[T]:
        """Run ``job`` when a thread is free and no item of a lower rank waits; its future is
        cancelled, the job not run, where ``stop`` is set by then."""
        done: Future[T] = Future()
        self._jobs.put((rank, next(self._order), _Job(job, done, stop)))
        return done

    def _work(self) -> None:
        while True:
            job = self._jobs.get()[2]
            if job is None:
                return
            if job.stop.is_set():
                job.done.cancel()  # (and the chain waiting for it told so, below)
            if not job.done.set_running_or_notify_cancel():
                continue  # the run stopped, or the chain gave it up, before it began
            try:
                job.done.set_result(job.run())
            except BaseException as exc:  # handed to the chain, which stops the run where it must
                job.done.set_exception(exc)


__all__ = ["ItemPool"]
