"""The results store of a run: ``RUN/results.sqlite`` and content-addressed ``RUN/outputs/``.

One row per prediction and one per verdict, each item written in one transaction, so a
run killed at any moment keeps every finished item whole and nothing twice. Output
images are written (temporary file, then rename) before the row that names them.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from yanami.store import sha256_hex

Status = Literal["ok", "refused", "error", "missing"]
STATUSES: tuple[Status, ...] = ("ok", "refused", "error", "missing")
RESULTS = "results.sqlite"
OUTPUTS = "outputs"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS predictions (
    item TEXT PRIMARY KEY,
    dialogue TEXT NOT NULL,
    scenario TEXT NOT NULL,
    kind TEXT NOT NULL,            -- turn | question
    turn INTEGER NOT NULL,
    qtype TEXT,                    -- RR | CR | CT | CU for questions
    status TEXT NOT NULL,          -- ok | refused | error | missing
    text TEXT,
    image TEXT,                    -- sha256 of the output image under outputs/
    error TEXT,
    seed INTEGER NOT NULL,
    history_fallbacks INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS verdicts (
    item TEXT NOT NULL,
    judge TEXT NOT NULL,
    judge_version TEXT NOT NULL,
    status TEXT NOT NULL,          -- ok | error (the judge failed: the item is not scored)
    score REAL,                    -- questions: 0..1
    vq REAL,                       -- turns: 0..10
    checks TEXT,                   -- turns: JSON [[check id, kind, capability, passed], ...]
    aligned TEXT,                  -- questions: JSON list of aligned capability-check ids
    reason TEXT,
    PRIMARY KEY (item, judge)
);
"""


@dataclass(frozen=True)
class Prediction:
    """What a model produced for one item."""

    item: str
    dialogue: str
    scenario: str
    kind: str
    turn: int
    qtype: str | None
    status: Status
    text: str | None
    image: str | None
    error: str | None
    seed: int
    history_fallbacks: int = 0


@dataclass(frozen=True)
class Verdict:
    """A judge's grade of one prediction."""

    item: str
    judge: str
    judge_version: str
    status: str
    """``ok``, or ``error`` when the judge failed (the item is then not scored)."""
    score: float | None
    vq: float | None
    checks: list[tuple[str, str, str | None, bool]] | None
    aligned: list[str] | None
    reason: str


class Results:
    """A run's results store (one writer; readers may open it at any time)."""

    def __init__(self, run: Path) -> None:
        self.run = run
        self.db = sqlite3.connect(run / RESULTS, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the database."""
        self.db.close()

    def done(self) -> set[str]:
        """Items with a prediction."""
        return {r[0] for r in self.db.execute("SELECT item FROM predictions")}

    def failed(self) -> set[str]:
        """Items whose prediction is an error."""
        return {r[0] for r in self.db.execute("SELECT item FROM predictions WHERE status = 'error'")}

    def image_path(self, sha: str) -> Path:
        """Where an output image lives."""
        return self.run / OUTPUTS / sha[:2] / sha

    def put_image(self, data: bytes) -> str:
        """Store an output image by content; returns its sha256."""
        sha = sha256_hex(data)
        path = self.image_path(sha)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{sha}.{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
        return sha

    def image(self, sha: str) -> bytes:
        """The bytes of an output image."""
        return self.image_path(sha).read_bytes()

    def write(self, prediction: Prediction, verdict: Verdict | None) -> None:
        """Record one item, prediction and verdict together."""
        p, v = prediction, verdict
        with self.db:
            self.db.execute("BEGIN")
            self.db.execute(
                "INSERT OR REPLACE INTO predictions VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (p.item, p.dialogue, p.scenario, p.kind, p.turn, p.qtype, p.status, p.text, p.image, p.error, p.seed,
                 p.history_fallbacks),
            )  # fmt: skip
            if v is not None:
                self.db.execute("DELETE FROM verdicts WHERE item = ? AND judge = ?", (p.item, v.judge))
                self.write_verdict(v)

    def write_verdict(self, v: Verdict) -> None:
        """Record (or replace) a verdict."""
        self.db.execute(
            "INSERT OR REPLACE INTO verdicts VALUES (?,?,?,?,?,?,?,?,?)",
            (v.item, v.judge, v.judge_version, v.status, v.score, v.vq,
             None if v.checks is None else json.dumps(v.checks), None if v.aligned is None else json.dumps(v.aligned),
             v.reason),
        )  # fmt: skip

    def predictions(self) -> dict[str, Prediction]:
        """Every prediction, by item."""
        rows = self.db.execute("SELECT * FROM predictions ORDER BY item")
        return {r[0]: Prediction(*r) for r in rows}

    def verdicts(self, judge: str) -> dict[str, Verdict]:
        """Every verdict of one judge, by item."""
        out = {}
        for r in self.db.execute("SELECT * FROM verdicts WHERE judge = ? ORDER BY item", (judge,)):
            checks = None if r[6] is None else [tuple(c) for c in json.loads(r[6])]
            aligned = None if r[7] is None else json.loads(r[7])
            out[r[0]] = Verdict(r[0], r[1], r[2], r[3], r[4], r[5], checks, aligned, r[8])  # type: ignore[arg-type]
        return out


def read_rows(run: Path, judge: str | None = None) -> tuple[dict[str, Prediction], dict[str, Verdict], dict[str, Any]]:
    """A finished or partial run: predictions, the verdicts of a judge (default: the run's), and its manifest."""
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    if manifest.get("version") != 2:
        from yanami.errors import UserError

        raise UserError(f"{run}: a run in format version {manifest.get('version')}, which this yanami does not read")
    store = Results(run)
    try:
        return store.predictions(), store.verdicts(judge or manifest["judge"]["name"]), manifest
    finally:
        store.close()
