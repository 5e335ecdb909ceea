"""Items in flight: a chain's questions side by side, its turns one after another, never more
than ``--concurrency`` items at once, the chain that started first served first, and a stopped
run that waits for nothing that will not run."""

from __future__ import annotations

import io
import itertools
import threading
import time
from concurrent.futures import as_completed

from PIL import Image

from yanami.contract import Request
from yanami.runner import _build, evaluate
from yanami.runner._chains import steps
from yanami.runner._items import Item
from yanami.runner._pool import ItemPool


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (512, 384), (90, 120, 150)).save(buf, format="PNG")
    return buf.getvalue()


def test_steps_keep_turns_alone_and_questions_together() -> None:
    items = [Item("d/t1", "d", "turn", 1), Item("d/t3", "d", "reply", 3), Item("d/t5", "d", "turn", 5)]
    items += [Item(f"d/q{k}", "d", "question", 2 + k, f"q{k}") for k in range(3)]
    assert [[i.id for i in s] for s in steps(items)] == [["d/t1"], ["d/t3"], ["d/t5"], ["d/q0", "d/q1", "d/q2"]]


def test_a_dialogues_questions_are_asked_side_by_side(world_bench, tmp_path, monkeypatch) -> None:
    """One dialogue, four questions: they meet (asked one after another, they never would)."""
    met = threading.Barrier(4, timeout=30)

    class Meeting:
        name = "meeting"
        generate = None

        def answer(self, request: Request) -> str:
            met.wait()
            return "A"

    monkeypatch.setattr(_build, "load_model", lambda *a: Meeting())
    s = evaluate(world_bench, "meeting", tmp_path / "run", limit=1, concurrency=16)
    assert s.items == 4 and s.statuses == {"ok": 4}


def test_turns_wait_for_each_other_and_questions_for_the_turns(world_bench, tmp_path, monkeypatch) -> None:
    """A model that draws and answers, 3 items in flight: never more than 3 calls at once; in a
    dialogue, a turn is asked alone, after the turn before it ended, and its questions after its
    last turn ended."""
    lock = threading.Lock()
    calls: list[tuple[str, str, float, float]] = []  # (dialogue, kind, start, end)
    now = [0]
    most = [0]

    class Both:
        name = "both"
        image = _png()

        def _call(self, request: Request, kind: str) -> None:
            with lock:
                now[0] += 1
                most[0] = max(most[0], now[0])
            start = time.monotonic()
            time.sleep(0.01)
            with lock:
                now[0] -= 1
                calls.append((request.item.rsplit("/", 1)[0], kind, start, time.monotonic()))

        def answer(self, request: Request) -> str:
            self._call(request, "question")
            return "A"

        def generate(self, request: Request) -> bytes:
            self._call(request, "turn")
            return self.image

    monkeypatch.setattr(_build, "load_model", lambda *a: Both())
    s = evaluate(world_bench, "both", tmp_path / "run", limit=4, concurrency=3, history="self")
    assert s.written == s.items == len(calls)
    assert most[0] <= 3
    for d in {c[0] for c in calls}:
        mine = sorted((c for c in calls if c[0] == d), key=lambda c: c[2])
        turns = [c for c in mine if c[1] == "turn"]
        for a, b in itertools.pairwise(turns):
            assert b[2] >= a[3], f"{d}: a turn began before the one before it ended"
        for c in mine:
            if c[1] == "question":
                assert not turns or c[2] >= turns[-1][3], f"{d}: a question began before its last turn ended"


def test_the_pool_serves_the_lowest_rank_first_and_never_more_than_its_size() -> None:
    stop = threading.Event()
    release = threading.Event()
    order: list[int] = []
    lock = threading.Lock()
    now, most = [0], [0]

    def job(rank: int) -> int:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
            order.append(rank)
        release.wait(10)
        with lock:
            now[0] -= 1
        return rank

    with ItemPool(2) as pool:
        first = [pool.submit(9, lambda: job(9), stop) for _ in range(2)]  # both threads busy
        time.sleep(0.05)
        later = [pool.submit(r, lambda r=r: job(r), stop) for r in (5, 1, 3, 1)]
        release.set()
        assert sorted(f.result(10) for f in first + later) == [1, 1, 3, 5, 9, 9]
    assert order == [9, 9, 1, 1, 3, 5] and most[0] == 2


def test_a_stopped_run_cancels_what_has_not_begun_and_its_chain_hears_of_it() -> None:
    stop, began, release = threading.Event(), threading.Event(), threading.Event()
    with ItemPool(1) as pool:
        busy = pool.submit(0, lambda: began.set() or release.wait(10), stop)
        waiting = [pool.submit(0, lambda: "never", stop) for _ in range(3)]
        assert began.wait(10)
        stop.set()
        release.set()
        done = list(as_completed([busy, *waiting], timeout=10))  # no hang: every one is told
    assert len(done) == 4 and busy.result() is True and all(f.cancelled() for f in waiting)
