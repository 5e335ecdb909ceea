"""Where a command's tasks run: threads of this process (`LocalExecutor`) or Ray actors across a
cluster (`RayExecutor`). ``yanami eval`` and ``yanami judge`` run their chains through them,
``yanami construct`` its dialogues; each hands what its tasks make to the caller, in the calling
thread, as it arrives (``on_results``), and the caller alone writes it.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Generic, Protocol, TypeVar

from yanami.scale._ray import actor_rows, cluster_cpus, ray_concurrency, ray_session

T = TypeVar("T")
R = TypeVar("R")
T_contra = TypeVar("T_contra", contravariant=True)

Work = Callable[[T, threading.Event], Iterable[R]]
"""A task's work in a thread: what it makes, item by item; it ends early once the event is set."""


class Executor(Protocol[T_contra, R]):
    def run(self, tasks: Iterator[T_contra], on_results: Callable[[list[R]], None]) -> None:
        """Run every task ``tasks`` yields (read as they are taken), calling ``on_results`` with
        what finished; a failure stops the run, after what was finished is handed over."""
        ...


class LocalExecutor(Generic[T, R]):
    """Tasks in threads of this process, ``concurrency`` at once: the tasks are read as the
    threads take them (one thread at a time), and only those in flight are held.

    ``stop`` (set when the run fails or is interrupted, and then no task is taken) is the
    work's own stop where it has one, so the tasks in flight end at their next step."""

    def __init__(self, work: Work[T, R], concurrency: int, stop: threading.Event | None = None) -> None:
        self.work, self.concurrency, self.stop = work, concurrency, stop

    def run(self, tasks: Iterator[T], on_results: Callable[[list[R]], None]) -> None:
        results: queue.Queue[tuple[R] | BaseException | None] = queue.Queue()
        taking, stop = threading.Lock(), self.stop or threading.Event()

        def worker() -> None:
            try:
                while not stop.is_set():
                    with taking:  # one thread reads the tasks at a time
                        task = next(tasks, None)
                    if task is None:
                        break
                    for result in self.work(task, stop):
                        results.put((result,))
            except BaseException as exc:  # a bug, or input that cannot be read: stop the run, keep what is handed over
                results.put(exc)
            finally:
                results.put(None)

        threads = [
            threading.Thread(target=worker, name=f"yanami-task-{k}", daemon=True) for k in range(self.concurrency)
        ]
        try:
            for t in threads:
                t.start()
            running = len(threads)
            while running:
                batch = _ready(results)  # what finished meanwhile, handed over at once
                on_results([got[0] for got in batch if isinstance(got, tuple)])
                for got in batch:
                    if got is None:
                        running -= 1
                    elif isinstance(got, BaseException):
                        raise got
        finally:
            stop.set()
            for t in threads:
                t.join()  # a task in progress finishes its item; what it reports now is not handed over


def _ready(results: queue.Queue[T]) -> list[T]:
    """The next finished result (waiting for it) and every other one already waiting."""
    batch = [results.get()]
    with contextlib.suppress(queue.Empty):
        while len(batch) < 256:
            batch.append(results.get_nowait())
    return batch


Setup = Callable[[Any, int, int], AbstractContextManager[tuple[Any, ...]]]
"""(ray, actors, tasks in flight per actor) -> a context giving the actors' constructor arguments
(what the run holds on the cluster while it runs, such as a shared budget, is made and ended there)."""


class RayExecutor(Generic[T, R]):
    """Tasks in a pool of Ray actors of class ``actor`` (a local Ray, or the cluster at
    ``address``), ``concurrency`` in flight across the cluster (None: two per CPU).

    Each task is one row of a Ray Data dataset (``encode``); the actor's ``__call__`` takes a
    batch of one row and yields its output rows, each handed back (``decode``) as it is made.
    An actor runs ``threads`` × its share of the tasks in Ray threads at once, and holds
    ``queued`` × its share more waiting, so none waits for Ray to hand it its next task."""

    def __init__(
        self,
        actor: type,
        setup: Setup,
        encode: Callable[[T], dict[str, Any]],
        decode: Callable[[dict[str, Any]], R],
        *,
        concurrency: int | None,
        address: str | None,
        threads: int = 1,
        queued: int = 1,
    ) -> None:
        self.actor, self.setup, self.encode, self.decode = actor, setup, encode, decode
        self.concurrency, self.address, self.threads, self.queued = concurrency, address, threads, queued

    def run(self, tasks: Iterator[T], on_results: Callable[[list[R]], None]) -> None:
        rows = [self.encode(t) for t in tasks]
        if not rows:
            return
        with ray_session(self.address) as ray:
            cpus = cluster_cpus(ray)
            actors, per_actor = ray_concurrency(cpus, self.concurrency or 2 * cpus)
            with self.setup(ray, actors, per_actor) as args:
                threads, queued = self.threads * per_actor, self.queued * per_actor
                for row in actor_rows(ray, rows, self.actor, args, actors, threads, queued):
                    on_results([self.decode(row)])


__all__ = ["Executor", "LocalExecutor", "RayExecutor", "Setup", "Work"]
