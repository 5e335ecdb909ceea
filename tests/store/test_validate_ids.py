"""`yanami validate`'s duplicate-id check: the same problem lines, in the same places, at ~8 bytes an id."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from yanami.store import _validate, validate_dataset
from yanami.store._ids import SeenIds


def _shards_with_duplicates(ds: Path) -> list[str]:
    """Two shards: line 1 again (twice, once in each shard), line 2 again, and a malformed line
    and a wrong-family line between them; returns the 8 original ids."""
    shard = ds / "dialogues" / "00000.jsonl"
    lines = shard.read_text().splitlines(keepends=True)
    other = json.loads(lines[3])
    other["family"] = "weave"
    shard.write_text("".join([*lines[:5], lines[0], "{bad\n", lines[1]]))
    (ds / "dialogues" / "00001.jsonl").write_text(
        "".join([lines[5], json.dumps(other) + "\n", lines[0], lines[6], lines[7], lines[1]])
    )
    return [json.loads(line)["id"] for line in lines]


def _line_problems(ds: Path) -> list[str]:
    return [str(p) for p in validate_dataset(ds) if str(p).startswith("dialogues/")]


def test_duplicates_named_in_place(dataset: Path) -> None:
    """Each repeat is one line naming the id's first line, among the other problems of the
    shards in line order (the shard listing first)."""
    a, b, _, d, *_ = _shards_with_duplicates(dataset)
    got = _line_problems(dataset)
    assert got[:4] == [
        "dialogues/00001.jsonl:0: -: shard is not listed in manifest.json",
        f"dialogues/00000.jsonl:6: id: duplicate dialogue id {a!r} (first at dialogues/00000.jsonl:1)",
        "dialogues/00000.jsonl:7: -: malformed JSON: key must be a string at line 1 column 2",
        f"dialogues/00000.jsonl:8: id: duplicate dialogue id {b!r} (first at dialogues/00000.jsonl:2)",
    ]
    # the wrong-family line: its schema problems, its family, then its id (as checked, in order)
    line2 = [p for p in got if p.startswith("dialogues/00001.jsonl:2: ")]
    assert got[4 : 4 + len(line2)] == line2 and len(line2) > 2
    assert line2[-2] == "dialogues/00001.jsonl:2: family: a weave dialogue in a yanami dataset (the manifest's family)"
    assert line2[-1] == f"dialogues/00001.jsonl:2: id: duplicate dialogue id {d!r} (first at dialogues/00000.jsonl:4)"
    assert got[4 + len(line2) :] == [
        f"dialogues/00001.jsonl:3: id: duplicate dialogue id {a!r} (first at dialogues/00000.jsonl:1)",
        f"dialogues/00001.jsonl:6: id: duplicate dialogue id {b!r} (first at dialogues/00000.jsonl:2)",
    ]


def test_hash_collisions_change_nothing(dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every id hashing alike (each line a suspect) and a tiny merge buffer give the same lines:
    a false hit is dropped, a true one named after its first line."""
    _shards_with_duplicates(dataset)
    want = [str(p) for p in validate_dataset(dataset)]
    monkeypatch.setattr(SeenIds, "RECENT", 2)
    assert [str(p) for p in validate_dataset(dataset)] == want
    monkeypatch.setattr(_validate, "hash", lambda _: 7, raising=False)
    assert [str(p) for p in validate_dataset(dataset)] == want


def test_valid_dataset_reads_nothing_twice(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(_validate, "_name_duplicates", lambda *a: calls.append(a))
    assert validate_dataset(built) == []
    assert calls == []


def test_seen_ids_cost_about_8_bytes_an_id() -> None:
    n = 300_000
    seen = SeenIds()
    tracemalloc.start()
    try:
        assert not any(seen.add(hash(f"d{i:07d}")) for i in range(n))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen.add(hash("d0000123")) and seen.add(hash(f"d{n - 1:07d}")) and not seen.add(hash("e1"))
    # a dict of the ids and their first lines costs ~200 bytes an id; numpy's arrays are traced too
    assert peak < 12 * n + (2 << 20), peak
