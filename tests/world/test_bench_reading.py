"""The reference agents read the dialogues their run asks about, never the whole bench, and what they
keep in memory changes no output."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from tests.helpers import edit_line
from yanami.contract import ImagePart, UserError
from yanami.runner import evaluate
from yanami.store import Dataset, DatasetWriter, Generator
from yanami.world import _agents
from yanami.world._agents import PARSED, BenchDialogues, bench_dialogues

COPIES = 15
DIALOGUES = 8 * COPIES


@pytest.fixture
def many(world_bench: Path, tmp_path: Path) -> Path:
    """The small world bench's 8 dialogues 15 times over under new ids (the scenarios in turn): a
    fresh bench for each test, as the agents' reader of a bench is shared within the process."""
    source = Dataset(world_bench)
    dialogues = list(source)
    path = tmp_path / "many"
    with DatasetWriter(path, split="bench", generator=Generator(name="world")) as w:
        for d in dialogues:
            for t in d.turns:
                for p in (*t.user.parts, *t.assistant.parts):
                    if isinstance(p, ImagePart):
                        w.add_image(source.image_bytes(p), p.source)
        for k in range(COPIES):
            for d in sorted(dialogues, key=lambda d: d.id[-1] + d.id):  # 000000 of each scenario, then 000001
                w.add_dialogue(d.model_copy(update={"id": f"{d.id}-{k:02d}"}))
        w.commit()
    return path


def _predictions(run: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(run / "results.sqlite") as db:
        return db.execute("SELECT item, status, text, image, error FROM predictions ORDER BY item").fetchall()


def _reader(bench: Path) -> BenchDialogues:
    root = bench.resolve()
    return bench_dialogues(root, hashlib.sha256((root / "manifest.json").read_bytes()).hexdigest())


def test_a_run_with_a_limit_reads_the_bench_only_as_far_as_its_dialogues(many: Path, tmp_path: Path) -> None:
    evaluate(many, "reference:oracle", tmp_path / "run", limit=4)
    ids = [d.id for d in Dataset(many)]
    chosen = {row[0].rpartition("/")[0] for row in _predictions(tmp_path / "run")}
    reader = _reader(many)
    assert len(chosen) == 4
    assert reader.read == max(ids.index(i) for i in chosen) + 1 < DIALOGUES
    assert reader.kept <= len(chosen)


def test_a_dialogue_past_the_run_is_never_read(many: Path, tmp_path: Path) -> None:
    """One that does not even validate, past the dialogues a run evaluates, does not stop it (the
    whole bench read at bind_bench did)."""
    edit_line(many, DIALOGUES, lambda d: d.update(scenario="no such scenario"))
    shard = many / "dialogues" / "00000.jsonl"
    manifest = json.loads((many / "manifest.json").read_text())
    manifest["shards"]["dialogues/00000.jsonl"] = hashlib.sha256(shard.read_bytes()).hexdigest()
    (many / "manifest.json").write_text(json.dumps(manifest))
    s = evaluate(many, "reference:stateless", tmp_path / "run", limit=8)
    assert s.items > 0 and _reader(many).read == 8
    with pytest.raises(UserError, match=f"00000.jsonl:{DIALOGUES}: invalid dialogue"):
        _reader(many).get("no-such-dialogue")  # read to the end to look for it


def test_the_reader_keeps_at_most_its_share_and_reads_again_what_it_let_go(many: Path) -> None:
    reader = BenchDialogues(many.resolve(), parsed=3)
    ids = [d.id for d in Dataset(many)]
    first = [reader.get(i) for i in ids[:10]]
    assert (reader.read, reader.kept) == (10, 3)
    assert reader.get(ids[0]) == first[0]  # let go, read again alone: the same dialogue
    assert reader.read == 10 and reader.kept == 3
    assert reader.get("no-such-dialogue") is None
    assert reader.read == DIALOGUES and reader.kept == 3  # looked for to the end, nothing more kept
    assert PARSED > 3


@pytest.mark.parametrize("kind", ["oracle", "stateful", "no-retrieval"])
def test_what_the_reader_keeps_changes_no_output(
    kind: str, world_bench: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Self-History with 4 chains in flight: a reader that keeps one dialogue reads them again and
    again, and every prediction is the same as with one that keeps them all."""
    evaluate(world_bench, f"reference:{kind}", tmp_path / "kept", history="self", concurrency=4)
    monkeypatch.setattr(_agents, "bench_dialogues", lambda root, sha: BenchDialogues(root, parsed=1))
    evaluate(world_bench, f"reference:{kind}", tmp_path / "one", history="self", concurrency=4)
    assert _predictions(tmp_path / "one") == _predictions(tmp_path / "kept")
