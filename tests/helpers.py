"""Helpers for tests that change datasets on disk."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


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
