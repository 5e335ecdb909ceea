"""Where a command's tasks run: threads of this process (`LocalExecutor`) or Ray actors across a
cluster (`RayExecutor`). ``yanami eval`` and ``yanami judge`` run their chains through them,
``yanami construct`` its dialogues; each hands what its tasks make to the caller, in the calling
thread, as it arrives (``on_results``), and the caller alone writes it.
"""

from __future__ import annotations

import contextlib
import gc
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Generic, Protocol, TypeVar, cast

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

    ``ahead``: a reader thread of its own reads up to that many tasks before a thread takes
    them, so a thread that finishes one starts the next at once, and what reading a task costs
    (a dialogue parsed, its stored rows looked up, its pictures read) is off the threads' path.

    ``stop`` (set when the run fails or is interrupted, and then no task is taken) is the
    work's own stop where it has one, so the tasks in flight end at their next step.

    While the tasks run, the objects made before are kept out of the cyclic garbage collector's
    sweeps (`frozen`)."""

    def __init__(self, work: Work[T, R], concurrency: int, stop: threading.Event | None = None, ahead: int = 0) -> None:
        self.work, self.concurrency, self.stop, self.ahead = work, concurrency, stop, ahead

    def run(self, tasks: Iterator[T], on_results: Callable[[list[R]], None]) -> None:
        results: queue.Queue[tuple[R] | BaseException | None] = queue.Queue()
        stop = self.stop or threading.Event()
        take = _Reader(tasks, self.ahead, stop, results.put) if self.ahead else _Taker(tasks)

        def worker() -> None:
            try:
                while not stop.is_set():
                    task = take()
                    if task is _END:
                        break
                    for result in self.work(cast(T, task), stop):
                        results.put((result,))
            except BaseException as exc:  # a bug, or input that cannot be read: stop the run, keep what is handed over
                results.put(exc)
            finally:
                results.put(None)

        threads = [
            threading.Thread(target=worker, name=f"yanami-task-{k}", daemon=True) for k in range(self.concurrency)
        ]
        with frozen():
            try:
                take.start()
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
                take.close()
                for t in threads:
                    t.join()  # a task in progress finishes its item; what it reports now is not handed over
                take.join()


@contextlib.contextmanager
def frozen() -> Iterator[None]:
    """The objects made so far (modules, clients, the bench's index) kept out of the cyclic garbage
    collector's sweeps while the block runs (`gc.freeze`): a full sweep holds the interpreter, and
    so every thread's next request, for as long as it reads every object."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


_END = object()
"""No task is left to take."""


class _Taker:
    """The tasks, taken by the threads themselves, one thread at a time."""

    def __init__(self, tasks: Iterator[object]) -> None:
        self.tasks, self.lock = tasks, threading.Lock()

    def __call__(self) -> object:
        with self.lock:
            return next(self.tasks, _END)

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    def join(self) -> None:
        pass


class _Reader:
    """The tasks, read by a thread of their own up to ``ahead`` before a thread takes them; a
    failure to read one stops the run (it is handed to ``failed``) after those read."""

    def __init__(
        self, tasks: Iterator[object], ahead: int, stop: threading.Event, failed: Callable[[BaseException], None]
    ) -> None:
        self.tasks, self.stop, self.failed = tasks, stop, failed
        self.room = threading.Semaphore(ahead)
        self.ready: queue.Queue[object] = queue.Queue()
        self.thread = threading.Thread(target=self._read, name="yanami-reader", daemon=True)

    def _read(self) -> None:
        try:
            while not self.stop.is_set():
                if not self.room.acquire(timeout=0.1):
                    continue
                task = next(self.tasks, _END)
                self.ready.put(task)
                if task is _END:
                    return
        except BaseException as exc:
            self.failed(exc)
        self.ready.put(_END)

    def __call__(self) -> object:
        task = self.ready.get()
        if task is _END:
            self.ready.put(_END)  # for the next thread
        else:
            self.room.release()
        return task

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        self.ready.put(_END)  # a thread waiting for a task stops

    def join(self) -> None:
        self.thread.join()


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
    batch of one row and yields its output rows, each handed back as it is made (``decode``: what
    the row holds; an actor that packs several results in one row sends Ray one block for them).
    An actor runs ``threads`` × its share of the tasks in Ray threads at once, and holds
    ``queued`` × its share more waiting, so none waits for Ray to hand it its next task."""

    def __init__(
        self,
        actor: type,
        setup: Setup,
        encode: Callable[[T], dict[str, Any]],
        decode: Callable[[dict[str, Any]], list[R]],
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
            with self.setup(ray, actors, per_actor) as args, frozen():  # the driver's sweeps, as the actors'
                threads, queued = self.threads * per_actor, self.queued * per_actor
                for row in actor_rows(ray, rows, self.actor, args, actors, threads, queued):
                    on_results(self.decode(row))


__all__ = ["Executor", "LocalExecutor", "RayExecutor", "Setup", "Work"]
