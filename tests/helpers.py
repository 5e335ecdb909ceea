"""Helpers for tests that change datasets on disk."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from yanami.contract import Dialogue


def edit_line(ds: Path, lineno: int, change: Callable[[dict[str, Any]], Any]) -> None:
    """Apply ``change`` to the JSON of line ``lineno`` (1-based) of the first shard."""
    shard = ds / "dialogues" / "00000.jsonl"
    lines = shard.read_text().splitlines(keepends=True)
    obj = json.loads(lines[lineno - 1])
    change(obj)
    lines[lineno - 1] = json.dumps(obj) + "\n"
    shard.write_text("".join(lines))


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` with its bytes, to prove a command wrote nothing."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def scrambled(d: Dialogue) -> Dialogue:
    """The same dialogue with every hidden annotation and every reference answer changed: what a
    model may not read, made useless, so that a run on it shows whether anything read it."""
    raw = json.loads(d.model_dump_json())
    for t in raw["turns"]:
        t["hidden"] = {"state": {"secret": "STATE-LEAK"}, "intent": {"secret": "INTENT-LEAK"}}
        for c in t["checks"]:
            c["hidden"] = {"predicate": {"secret": "PREDICATE-LEAK"}}
    for q in raw["questions"]:
        q["answer"] = "ANSWER-LEAK"
        q["answer_letters"] = ["G"]
        q["aligned_checks"] = []
        q["hidden"] = {"intent": {"secret": "QINTENT-LEAK"}}
    return Dialogue.model_validate(raw)
