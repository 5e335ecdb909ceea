"""How a Ray actor hands a task's items back (`_blocks`): its chains' items a few to a block, chain
after chain in the task's order, cut by count and never by time, so a task that Ray runs again after
its actor died yields the same blocks in the same places (Ray skips those the driver already took,
by place). A block travels as one row: Ray Data cuts a batch of several rows into blocks of one."""

from __future__ import annotations

import json
import queue
import threading
import time
from typing import Any

import pytest

from yanami.contract import UserError
from yanami.runner import _executors
from yanami.runner._executors import _blocks, _failure, _result, _row

BLOCK = _executors.BLOCK


def _chain(names: list[str], pauses: dict[int, float] | None = None) -> queue.Queue[dict[str, Any] | None]:
    """A chain's rows as a feeding thread puts them, waiting ``pauses[k]`` seconds after the k-th."""
    rows: queue.Queue[dict[str, Any] | None] = queue.Queue()

    def feed() -> None:
        for k, name in enumerate(names):
            rows.put(_row_of(name))
            time.sleep((pauses or {}).get(k, 0.0))
        rows.put(None)

    threading.Thread(target=feed).start()
    return rows


def _row_of(name: str) -> dict[str, Any]:
    return {"prediction": name, "verdict": "", "judged": False, "failure": "", "user": False}


def _names(blocks: list[dict[str, list[str]]]) -> list[list[str]]:
    assert all(len(b["rows"]) == 1 for b in blocks)  # one row to a batch: Ray keeps it one block
    return [[r["prediction"] for r in json.loads(b["rows"][0])] for b in blocks]


def test_a_chains_items_go_back_a_block_at_a_time_in_order() -> None:
    names = [f"q{k}" for k in range(BLOCK * 2 + 1)]
    assert _names(list(_blocks([_chain(names)]))) == [names[:BLOCK], names[BLOCK : 2 * BLOCK], names[2 * BLOCK :]]


def test_a_block_holds_the_items_of_several_chains_chain_after_chain() -> None:
    chains = [[f"c{c}q{k}" for k in range(1 + c % 2)] for c in range(2 * BLOCK)]  # one or two items each
    names = [n for chain in chains for n in chain]
    got = _names(list(_blocks([_chain(chain) for chain in chains])))
    assert got == [names[k : k + BLOCK] for k in range(0, len(names), BLOCK)]


def test_the_blocks_are_the_same_however_the_items_are_timed() -> None:
    names = [f"t{k}" for k in range(BLOCK + 2)]
    fast = _names(list(_blocks([_chain(names[:2]), _chain(names[2:])])))
    # a long wait after the first item of each chain: blocks cut by time would split there
    uneven = _names(list(_blocks([_chain(names[:2], {0: 0.5}), _chain(names[2:], {0: 0.5})])))
    assert fast == uneven == [names[:BLOCK], names[BLOCK:]]


def test_chains_with_no_items_left_give_no_block() -> None:
    assert list(_blocks([_chain([]), _chain([])])) == []


def test_the_driver_reads_a_block_back_to_its_rows_and_stops_at_a_failure(world_dialogues) -> None:
    from yanami.contract import Prediction

    d = world_dialogues[0]
    p = Prediction(item=f"{d.id}/q0", dialogue=d.id, scenario=d.group, kind="question", turn=1, status="ok", text="A")
    row = {"rows": json.dumps([_row(p, None, judged=False), _row(p, None, judged=True)])}  # as Ray hands it over
    assert _result(row) == [(p, None, False), (p, None, True)]
    failed = [_row(p, None, judged=False), _failure(UserError("a bench image cannot be read"))]
    with pytest.raises(UserError, match=r"^a bench image cannot be read$"):
        _result({"rows": json.dumps(failed)})
    with pytest.raises(RuntimeError, match=r"^KeyError: 'x'$"):  # a bug in the actor: named with its type
        _result({"rows": json.dumps([_failure(KeyError("x"))])})
