"""How a Ray actor hands a task's items back (`_blocks`): a chain's items a few to a block, in the
chain's order, cut by count and never by time, so a task that Ray runs again after its actor died
yields the same blocks in the same places (Ray skips those the driver already took, by place)."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

from yanami.runner import _executors
from yanami.runner._executors import _blocks


def _row(name: str) -> dict[str, list[Any]]:
    return {"prediction": [name], "verdict": [""], "judged": [False], "failure": [""], "user": [False]}


def _chain(names: list[str], pauses: dict[int, float] | None = None) -> queue.Queue[dict[str, list[Any]] | None]:
    """A chain's rows as a feeding thread puts them, waiting ``pauses[k]`` seconds after the k-th."""
    rows: queue.Queue[dict[str, list[Any]] | None] = queue.Queue()

    def feed() -> None:
        for k, name in enumerate(names):
            rows.put(_row(name))
            time.sleep((pauses or {}).get(k, 0.0))
        rows.put(None)

    threading.Thread(target=feed).start()
    return rows


def test_a_chains_items_go_back_a_block_at_a_time_in_order() -> None:
    names = [f"q{k}" for k in range(_executors.BLOCK * 2 + 1)]
    blocks = list(_blocks(_chain(names)))
    assert [b["prediction"] for b in blocks] == [
        names[: _executors.BLOCK],
        names[_executors.BLOCK : 2 * _executors.BLOCK],
        names[2 * _executors.BLOCK :],
    ]
    assert all(len(b["judged"]) == len(b["prediction"]) for b in blocks)  # every column stays aligned


def test_the_blocks_are_the_same_however_the_items_are_timed() -> None:
    names = [f"t{k}" for k in range(6)]
    fast = [b["prediction"] for b in _blocks(_chain(names))]
    # a long wait after the second item and after the fifth: blocks cut by time would split there
    uneven = [b["prediction"] for b in _blocks(_chain(names, {1: 0.8, 4: 0.8}))]
    assert fast == uneven == [names[: _executors.BLOCK], names[_executors.BLOCK :]]


def test_a_chain_with_no_items_left_gives_no_block() -> None:
    assert list(_blocks(_chain([]))) == []
