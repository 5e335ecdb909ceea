"""`yanami judge RUN`: the stored predictions judged again, a dialogue at a time."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from yanami.contract import Dialogue
from yanami.runner import evaluate, rejudge
from yanami.store import Dataset


def _verdicts(run: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(run / "results.sqlite") as db:
        return db.execute("SELECT * FROM verdicts ORDER BY item, judge").fetchall()


def _forget_verdicts(run: Path) -> None:
    db = sqlite3.connect(run / "results.sqlite")
    with db:
        db.execute("DELETE FROM verdicts")
    db.close()


@pytest.mark.parametrize(("history", "concurrency"), [("gt", 1), ("self", 3)])
def test_rejudging_gives_the_verdicts_of_the_run_reading_only_its_dialogues(
    world_bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, history: str, concurrency: int
) -> None:
    run = tmp_path / "run"
    evaluate(world_bench, "reference:no-coreference", run, limit=2, history=history)
    want = _verdicts(run)
    assert len(want) > 4
    _forget_verdicts(run)
    read: list[str] = []
    every = Dataset.__iter__

    def counted(self: Dataset) -> Iterator[Dialogue]:
        for d in every(self):
            read.append(d.id)
            yield d

    monkeypatch.setattr(Dataset, "__iter__", counted)
    s = rejudge(run, "exact", concurrency=concurrency)
    assert (s.items, s.skipped, s.written) == (len(want), 0, len(want))
    assert _verdicts(run) == want
    # reading stops at the run's last dialogue (twice: the judge's check, then the judging)
    with sqlite3.connect(run / "results.sqlite") as db:
        ran = {r[0] for r in db.execute("SELECT DISTINCT dialogue FROM predictions")}
    order = [d.id for d in every(Dataset(world_bench))]
    last = max(order.index(i) for i in ran)
    assert last < len(order) - 1 and read == 2 * order[: last + 1]
    # nothing left to do: the bench is not read for judging at all
    read.clear()
    s = rejudge(run, "exact")
    assert (s.items, s.skipped, s.written) == (len(want), len(want), 0)
    assert read == order[: last + 1]
