"""An endpoint's starts shared by the processes of a cluster (`ClusterPace` over one `Schedule`),
without Ray: each "process" is a `ClusterPace` of its own with threads that call it."""

from __future__ import annotations

import threading
import time

from yanami.scale._pace import HORIZON_S, ClusterPace, Schedule


def _starts(pace: ClusterPace, threads: int, each: int, work_s: float = 0.0) -> list[float]:
    """When each of ``threads`` × ``each`` requests started (it sleeps until its start, as
    `Endpoint.call` does, then "works" ``work_s``)."""
    found: list[float] = []
    lock = threading.Lock()

    def one() -> None:
        for _ in range(each):
            start = pace.next_start()
            assert isinstance(start, float)
            if (wait := start - time.monotonic()) > 0:
                time.sleep(wait)
            with lock:
                found.append(time.monotonic())
            time.sleep(work_s)

    pool = [threading.Thread(target=one) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return found


def _most_in(starts: list[float], window: float) -> int:
    """The most starts in any ``window`` seconds."""
    s = sorted(starts)
    return max(sum(1 for b in s[k:] if b < a + window) for k, a in enumerate(s))


def test_one_busy_process_of_four_uses_the_whole_pace_and_never_more() -> None:
    interval = 0.02  # 50 starts a second for the cluster
    schedule = Schedule(interval)
    paces = [ClusterPace(schedule.take, interval) for _ in range(4)]
    for idle in paces[1:]:
        _starts(idle, 1, 1)  # the others made a request each, and then nothing: they hold no start
    busy = _starts(paces[0], threads=8, each=12)
    busy.sort()
    rate = (len(busy) - 1) / (busy[-1] - busy[0])
    assert rate >= 0.9 / interval, rate  # an even share would be a quarter
    assert rate <= 1.02 / interval, rate
    assert _most_in(busy, 0.5) <= (0.5 + HORIZON_S) / interval + 2
    assert paces[0].asked < len(busy)  # the waiting requests' starts were asked for together


def test_two_busy_processes_share_the_pace_and_never_exceed_it() -> None:
    interval = 0.02
    schedule = Schedule(interval)
    a, b = ClusterPace(schedule.take, interval), ClusterPace(schedule.take, interval)
    got: dict[str, list[float]] = {}
    runs = [threading.Thread(target=lambda k=k, p=p: got.__setitem__(k, _starts(p, 4, 10))) for k, p in
            (("a", a), ("b", b))]  # fmt: skip
    for t in runs:
        t.start()
    for t in runs:
        t.join()
    both = sorted(got["a"] + got["b"])
    assert len(both) == 80
    assert (len(both) - 1) / (both[-1] - both[0]) <= 1.02 / interval
    assert _most_in(both, 0.5) <= (0.5 + HORIZON_S) / interval + 2
    assert min(got["a"]) < max(got["b"]) and min(got["b"]) < max(got["a"])  # in turn, not one after the other


def test_a_busy_process_asks_the_cluster_a_few_times_a_second_not_once_a_request() -> None:
    interval = 1e-5  # 6,000,000 a minute: the pace never holds a request back
    pace = ClusterPace(Schedule(interval).take, interval)
    starts = _starts(pace, threads=4, each=300, work_s=0.002)
    assert len(starts) == 1200
    assert pace.asked < len(starts) / 10, pace.asked  # it takes what it expects in the next 250 ms


def test_an_idle_process_saves_nothing_up() -> None:
    interval = 0.05
    schedule = Schedule(interval)
    pace = ClusterPace(schedule.take, interval)
    _starts(pace, 1, 1)
    time.sleep(0.3)  # six starts' worth of time unused: lost, not a burst later
    later = sorted(_starts(pace, threads=4, each=1))
    assert later[-1] - later[0] >= 3 * interval * 0.9


def test_a_refusal_reaches_every_process() -> None:
    pace = ClusterPace(lambda n: (0.0, 0, "401 from the server"), 0.01)
    assert pace.next_start() == "401 from the server"
