"""The results store of a run: ``RUN/results.sqlite`` and content-addressed ``RUN/outputs/``.

One row per prediction and one per verdict, each item written whole in one transaction
(with the other items finished at the same moment), so a run killed at any moment keeps
every finished item whole and nothing twice. Output
images are written (temporary file, then rename) before the row that names them. The
store owns its connection and its transactions: callers use its methods, never SQL.
Rows are read by column name into the typed records of the run format (`yanami.core._runs`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from yanami.core._files import atomic_write, sha256_hex
from yanami.core._runs import STATUSES, CheckResult, Prediction, RunManifest, Status, Verdict, read_manifest

__all__ = ["OUTPUTS", "RESULTS", "STATUSES", "Results", "RunRows", "Status", "read_rows"]

RESULTS = "results.sqlite"
OUTPUTS = "outputs"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS predictions (
    item TEXT PRIMARY KEY,
    dialogue TEXT NOT NULL,
    scenario TEXT NOT NULL,
    kind TEXT NOT NULL,            -- turn | question | reply
    turn INTEGER NOT NULL,
    qtype TEXT,                    -- RR | CR | CT | CU for questions
    status TEXT NOT NULL,          -- ok | refused | error | missing
    text TEXT,
    image TEXT,                    -- sha256 of the output image under outputs/
    error TEXT,
    seed INTEGER,                  -- the seed the request carried (null: none; runs before format 5: NOT NULL)
    history_fallbacks INTEGER NOT NULL DEFAULT 0,
    calls INTEGER NOT NULL DEFAULT 1    -- model calls the item took (test-time strategies)
);
CREATE TABLE IF NOT EXISTS verdicts (
    item TEXT NOT NULL,
    judge TEXT NOT NULL,
    judge_version TEXT NOT NULL,
    status TEXT NOT NULL,          -- ok | error (the judge failed: the item is not scored)
    score REAL,                    -- questions: 0..1
    vq REAL,                       -- turns: 0..10
    checks TEXT,                   -- turns: JSON [[check id, kind, capability, passed(, effect)], ...]
    aligned TEXT,                  -- questions: JSON list of aligned capability-check ids
    reason TEXT,
    scores TEXT,                   -- WEAVE, IMUG-Bench: JSON object of the protocol's metrics
    PRIMARY KEY (item, judge)
);
"""


def _insert(table: str, columns: list[str]) -> str:
    return f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES ({', '.join(':' + c for c in columns)})"


_PREDICTION_COLUMNS = list(Prediction.model_fields)
_VERDICT_COLUMNS = list(Verdict.model_fields)
_INSERT_PREDICTION = _insert("predictions", _PREDICTION_COLUMNS)
_INSERT_VERDICT = _insert("verdicts", _VERDICT_COLUMNS)


def _dump_checks(checks: list[CheckResult] | None) -> str | None:
    """A verdict's checks as stored: a JSON list of ``[id, kind, capability, passed]``, with the
    check's ``effect`` as a fifth element when it has one, and a graded check's ``score`` as a
    sixth (the fifth then null if need be)."""
    if checks is None:
        return None
    rows = []
    for c in checks:
        tail = [c.effect, c.score] if c.score is not None else [c.effect] if c.effect else []
        rows.append([c.id, c.kind, c.capability, c.passed, *tail])
    return json.dumps(rows)


def _load_checks(text: str | None) -> list[CheckResult] | None:
    """The stored form back (the one place that knows its layout)."""
    if text is None:
        return None
    rows = json.loads(text)
    return [
        CheckResult(
            id=cid,
            kind=kind,
            capability=cap,
            passed=passed,
            effect=rest[0] if rest else None,
            score=rest[1] if len(rest) > 1 else None,
        )
        for cid, kind, cap, passed, *rest in rows
    ]


def _items_of(dialogue: str) -> tuple[str, str]:
    """The range of item ids (``<dialogue>/...``) of one dialogue: ``/`` is followed by ``0``,
    and a dialogue id holds no ``/``."""
    return f"{dialogue}/", f"{dialogue}0"


def _verdict(r: sqlite3.Row) -> Verdict:
    row = dict(r)
    row["checks"] = _load_checks(row["checks"])
    row["aligned"] = None if row["aligned"] is None else json.loads(row["aligned"])
    row["reason"] = row["reason"] or ""
    row["scores"] = None if row["scores"] is None else json.loads(row["scores"])
    return Verdict.model_validate(row)


class RunRows(NamedTuple):
    """A run as read: its predictions and one judge's verdicts (by item), and its manifest."""

    predictions: dict[str, Prediction]
    verdicts: dict[str, Verdict]
    manifest: RunManifest


class Results:
    """A run's results store (one writer; readers may open it at any time)."""

    def __init__(self, run: Path) -> None:
        self.run = run
        self._db = sqlite3.connect(run / RESULTS, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        columns = {r["name"] for r in self._db.execute("PRAGMA table_info(verdicts)")}
        if "scores" not in columns:  # a store of run format 2
            self._db.execute("ALTER TABLE verdicts ADD COLUMN scores TEXT")
        columns = {r["name"] for r in self._db.execute("PRAGMA table_info(predictions)")}
        if "calls" not in columns:
            self._db.execute("ALTER TABLE predictions ADD COLUMN calls INTEGER NOT NULL DEFAULT 1")

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def __enter__(self) -> Results:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def done(self) -> set[str]:
        """Items with a prediction."""
        return {r["item"] for r in self._db.execute("SELECT item FROM predictions")}

    def failed(self) -> set[str]:
        """Items whose prediction is an error."""
        return {r["item"] for r in self._db.execute("SELECT item FROM predictions WHERE status = 'error'")}

    def count_done(self, dialogue: str | None = None, *, errors: bool = True) -> int:
        """How many items have a prediction (of one dialogue; not counting errors unless ``errors``)."""
        where, args = ("WHERE item >= ? AND item < ?", _items_of(dialogue)) if dialogue is not None else ("", ())
        if not errors:
            where = f"{where} AND status != 'error'" if where else "WHERE status != 'error'"
        return int(self._db.execute(f"SELECT count(*) FROM predictions {where}", args).fetchone()[0])

    def image_path(self, sha: str) -> Path:
        """Where an output image lives."""
        return self.run / OUTPUTS / sha[:2] / sha

    def put_image(self, data: bytes) -> str:
        """Store an output image by content; returns its sha256."""
        sha = sha256_hex(data)
        path = self.image_path(sha)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, data, fsync=False)  # as durable as the rows (SQLite synchronous=NORMAL)
        return sha

    def image(self, sha: str) -> bytes:
        """The bytes of an output image."""
        return self.image_path(sha).read_bytes()

    def write(self, prediction: Prediction, verdict: Verdict | None) -> None:
        """Record one item, its prediction and its verdict (if any), in one transaction."""
        self.write_items([(prediction, verdict)])

    def write_items(self, items: list[tuple[Prediction, Verdict | None]]) -> None:
        """Record several finished items in one transaction (each whole: its prediction and its verdict)."""
        with self._transaction():
            for prediction, verdict in items:
                self._db.execute(_INSERT_PREDICTION, prediction.model_dump())
                if verdict is not None:
                    self._db.execute(_INSERT_VERDICT, self._verdict_row(verdict))

    def write_verdict(self, verdict: Verdict) -> None:
        """Record (or replace) one verdict, in its own transaction."""
        with self._transaction():
            self._db.execute(_INSERT_VERDICT, self._verdict_row(verdict))

    def predictions(self) -> dict[str, Prediction]:
        """Every prediction, by item."""
        rows = self._db.execute(f"SELECT {', '.join(_PREDICTION_COLUMNS)} FROM predictions ORDER BY item")
        return {r["item"]: Prediction.model_validate(dict(r)) for r in rows}

    def predictions_of(self, dialogue: str) -> dict[str, Prediction]:
        """The predictions of one dialogue's items, by item (read through the primary key)."""
        rows = self._db.execute(
            f"SELECT {', '.join(_PREDICTION_COLUMNS)} FROM predictions WHERE item >= ? AND item < ? ORDER BY item",
            _items_of(dialogue),
        )
        return {r["item"]: Prediction.model_validate(dict(r)) for r in rows}

    def verdicts(self, judge: str) -> dict[str, Verdict]:
        """Every verdict of one judge, by item."""
        rows = self._db.execute(
            f"SELECT {', '.join(_VERDICT_COLUMNS)} FROM verdicts WHERE judge = ? ORDER BY item", (judge,)
        )
        return {r["item"]: _verdict(r) for r in rows}

    def verdicts_of(self, dialogue: str, judge: str) -> dict[str, Verdict]:
        """One judge's verdicts on one dialogue's items, by item."""
        rows = self._db.execute(
            f"SELECT {', '.join(_VERDICT_COLUMNS)} FROM verdicts WHERE item >= ? AND item < ? AND judge = ? "
            "ORDER BY item",
            (*_items_of(dialogue), judge),
        )
        return {r["item"]: _verdict(r) for r in rows}

    def count_dialogues(self) -> int:
        """How many dialogues have a prediction."""
        return int(self._db.execute("SELECT count(DISTINCT dialogue) FROM predictions").fetchone()[0])

    def judging_left(self, judge: str, version: str) -> tuple[int, int]:
        """``(done, todo)`` for re-judging with ``judge`` at ``version``: the items it already
        graded (an ok verdict of this version), and the ok predictions it has not."""
        done = self._db.execute(
            "SELECT count(*) FROM verdicts WHERE judge = ? AND judge_version = ? AND status = 'ok'", (judge, version)
        ).fetchone()[0]
        todo = self._db.execute(
            "SELECT count(*) FROM predictions AS p WHERE p.status = 'ok' AND NOT EXISTS (SELECT 1 FROM verdicts AS v "
            "WHERE v.item = p.item AND v.judge = ? AND v.judge_version = ? AND v.status = 'ok')",
            (judge, version),
        ).fetchone()[0]
        return int(done), int(todo)

    def judges(self) -> dict[str, int]:
        """The judges with verdicts in the store, with how many each."""
        rows = self._db.execute("SELECT judge, count(*) AS n FROM verdicts GROUP BY judge ORDER BY judge")
        return {r["judge"]: r["n"] for r in rows}

    @staticmethod
    def _verdict_row(v: Verdict) -> dict[str, Any]:
        row = v.model_dump()
        row["checks"] = _dump_checks(v.checks)
        row["aligned"] = None if v.aligned is None else json.dumps(v.aligned)
        row["scores"] = None if v.scores is None else json.dumps(v.scores, sort_keys=True)
        return row

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """Run the block in one transaction: committed when it ends, rolled back when it raises."""
        self._db.execute("BEGIN")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")


def read_rows(run: Path, judge: str | None = None) -> RunRows:
    """A finished or partial run: predictions, the verdicts of a judge (default: the run's), and its manifest."""
    manifest = read_manifest(run)
    with Results(run) as store:
        return RunRows(store.predictions(), store.verdicts(judge or manifest.judge.name), manifest)
