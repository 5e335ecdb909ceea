"""The local executor: tasks read ahead by a reader of their own, in order, and a failure to read
one stops the run after what was finished is handed over."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from yanami.contract import UserError
from yanami.scale import LocalExecutor


def _run(tasks: Iterator[int], ahead: int, concurrency: int = 3) -> list[int]:
    done: list[int] = []
    executor = LocalExecutor(lambda t, stop: [t * 10], concurrency, ahead=ahead)
    executor.run(tasks, done.extend)
    return done


@pytest.mark.parametrize("ahead", [0, 1, 4, 100])
def test_every_task_runs_once_whatever_is_read_ahead(ahead) -> None:
    assert sorted(_run(iter(range(50)), ahead)) == [10 * k for k in range(50)]


def test_the_reader_reads_no_more_than_it_may_ahead_of_the_threads() -> None:
    """The threads hold one task each; the reader at most ``ahead`` more."""
    taken, release = threading.Semaphore(0), threading.Event()
    read: list[int] = []

    def tasks() -> Iterator[int]:
        for k in range(20):
            read.append(k)
            yield k

    def work(t: int, stop: threading.Event) -> list[int]:
        taken.release()
        release.wait(10)
        return [t]

    executor = LocalExecutor(work, 2, ahead=3)
    done: list[int] = []
    runner = threading.Thread(target=executor.run, args=(tasks(), done.extend))
    runner.start()
    for _ in range(2):
        assert taken.acquire(timeout=10)  # both threads hold a task
    for _ in range(50):  # the reader catches up, and stops there
        if len(read) >= 5:
            break
        threading.Event().wait(0.01)
    threading.Event().wait(0.1)
    assert len(read) == 5
    release.set()
    runner.join(10)
    assert sorted(done) == list(range(20))


def test_a_task_that_cannot_be_read_stops_the_run_after_what_was_finished() -> None:
    def tasks() -> Iterator[int]:
        yield from range(5)
        raise UserError("bench.jsonl:6: invalid dialogue")

    done: list[int] = []
    with pytest.raises(UserError, match=r"bench\.jsonl:6"):
        LocalExecutor(lambda t, stop: [t], 2, ahead=2).run(tasks(), done.extend)
    assert set(done) <= set(range(5))


def test_a_failing_task_stops_the_reader_and_every_thread() -> None:
    def work(t: int, stop: threading.Event) -> list[int]:
        if t == 3:
            raise RuntimeError("boom")
        return [t]

    before = threading.active_count()
    with pytest.raises(RuntimeError, match="boom"):
        LocalExecutor(work, 4, ahead=4).run(iter(range(10_000)), lambda rows: None)
    assert threading.active_count() == before


def test_while_the_tasks_run_what_was_made_before_is_out_of_the_collectors_sweeps() -> None:
    """A full sweep of the cyclic collector holds the interpreter, every thread's request with it:
    the objects made before the run are frozen while it runs (what ``on_results`` sees), and
    handed back to the collector after."""
    import gc

    seen: list[int] = []
    LocalExecutor(lambda t, stop: [t], 2).run(iter(range(5)), lambda rows: seen.append(gc.get_freeze_count()))
    assert seen and min(seen) > 0
    assert gc.get_freeze_count() == 0
