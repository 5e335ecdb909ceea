"""Writing dataset directories: atomic, deduplicated, deterministic, and careful with paths."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import snapshot
from yanami.contract import ImageSource, UserError
from yanami.store import Dataset, DatasetWriter, Generator, ImageProblem, validate_dataset
from yanami.synthetic import render_placeholder, synthetic_dialogue, write_synthetic

GEN = Generator(name="test")


def test_same_seed_gives_byte_identical_datasets(tmp_path: Path) -> None:
    write_synthetic(tmp_path / "a", 5, seed=3)
    write_synthetic(tmp_path / "b", 5, seed=3)
    write_synthetic(tmp_path / "c", 5, seed=4)
    assert snapshot(tmp_path / "a") == snapshot(tmp_path / "b")
    assert snapshot(tmp_path / "a") != snapshot(tmp_path / "c")


def test_shards_split_at_the_shard_size(tmp_path: Path) -> None:
    with DatasetWriter(tmp_path / "ds", split="train", generator=GEN, shard_size=2) as w:
        for i in range(5):
            d, images = synthetic_dialogue(i, seed=0)
            for data in images.values():
                w.add_image(data, ImageSource.USER)
            w.add_dialogue(d)
    ds = Dataset(tmp_path / "ds")
    assert list(ds.manifest.shards) == [f"dialogues/{i:05d}.jsonl" for i in range(3)]
    assert [d.id for d in ds] == [synthetic_dialogue(i, seed=0)[0].id for i in range(5)]
    assert validate_dataset(tmp_path / "ds") == []


def test_images_are_deduplicated_by_hash(tmp_path: Path) -> None:
    import random

    data = render_placeholder(random.Random(1), 32, 32)
    with DatasetWriter(tmp_path / "ds", split="bench", generator=GEN) as w:
        a = w.add_image(data, ImageSource.USER)
        b = w.add_image(data, ImageSource.ASSISTANT)
    assert a.sha256 == b.sha256 and (a.width, a.height) == (32, 32)
    assert Dataset(tmp_path / "ds").manifest.counts.images == 1


def test_an_exception_leaves_no_trace(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), DatasetWriter(tmp_path / "ds", split="bench", generator=GEN) as w:
        d, images = synthetic_dialogue(0, seed=0)
        for data in images.values():
            w.add_image(data, ImageSource.USER)
        w.add_dialogue(d)
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_overwrite_keeps_the_old_dataset(tmp_path: Path) -> None:
    write_synthetic(tmp_path / "ds", 3, seed=1)
    before = snapshot(tmp_path / "ds")
    with pytest.raises(KeyboardInterrupt), DatasetWriter(tmp_path / "ds", split="bench", generator=GEN, overwrite=True):
        raise KeyboardInterrupt
    assert snapshot(tmp_path / "ds") == before
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]


def test_overwrite_replaces_a_dataset_whole(tmp_path: Path) -> None:
    write_synthetic(tmp_path / "ds", 3, seed=1)
    write_synthetic(tmp_path / "ds", 2, seed=2, overwrite=True)
    assert len(Dataset(tmp_path / "ds")) == 2
    assert validate_dataset(tmp_path / "ds") == []
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]


def test_refuses_to_replace_what_is_not_a_dataset(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "thesis.tex").write_text("precious")
    with pytest.raises(UserError, match="not a yanami dataset"):
        DatasetWriter(tmp_path / "home", split="bench", generator=GEN, overwrite=True)
    with pytest.raises(UserError, match="already exists"):
        DatasetWriter(tmp_path / "home", split="bench", generator=GEN)
    assert (tmp_path / "home" / "thesis.tex").read_text() == "precious"


def test_refuses_inconsistent_dialogues_and_unknown_images(tmp_path: Path) -> None:
    d, images = synthetic_dialogue(0, seed=0)
    with DatasetWriter(tmp_path / "ds", split="bench", generator=GEN) as w:
        with pytest.raises(ValueError, match="was not added"):
            w.add_dialogue(d)
        for data in images.values():
            w.add_image(data, ImageSource.USER)
        w.add_dialogue(d)
        with pytest.raises(ValueError, match="duplicate dialogue id"):
            w.add_dialogue(d)
        bad = d.model_copy(update={"questions": [d.questions[0].model_copy(update={"after_turn": 99})]})
        with pytest.raises(ValueError, match="after_turn"):
            w.add_dialogue(bad.model_copy(update={"id": "other"}))
        with pytest.raises(ImageProblem):
            w.add_image(b"not an image", ImageSource.USER)


def test_a_killed_writer_leaves_the_old_state(tmp_path: Path) -> None:
    """SIGKILL in the middle of a write: the target is untouched; the next writer cleans up."""
    write_synthetic(tmp_path / "ds", 2, seed=1)
    before = snapshot(tmp_path / "ds")
    script = textwrap.dedent(
        f"""
        import sys
        from yanami.store import DatasetWriter, Generator
        from yanami.contract import ImageSource
        from yanami.synthetic import synthetic_dialogues
        w = DatasetWriter({str(tmp_path / "ds")!r}, split="bench", generator=Generator(name="t"), overwrite=True)
        for i, (d, images) in enumerate(synthetic_dialogues(10_000, seed=5)):
            for data in images.values():
                w.add_image(data, ImageSource.USER)
            w.add_dialogue(d)
            if i == 20:
                print("writing", flush=True)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "writing"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert snapshot(tmp_path / "ds") == before
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name != "ds")
    assert leftovers[0] == ".ds.lock" and [p[:8] for p in leftovers[1:]] == [".ds.tmp-"]  # its lock died with it
    write_synthetic(tmp_path / "ds", 1, seed=1, overwrite=True)
    assert [p.name for p in tmp_path.iterdir()] == ["ds"]


def test_a_second_writer_of_the_same_output_stops_at_once(tmp_path: Path) -> None:
    """Two processes writing one --out: the second gets one line naming the first, and nothing
    of the first's work is touched; once the first is done the name is free again."""
    script = textwrap.dedent(
        f"""
        import sys
        from yanami.store import DatasetWriter, Generator
        w = DatasetWriter({str(tmp_path / "ds")!r}, split="bench", generator=Generator(name="t"))
        print("holding", flush=True)
        sys.stdin.read()
        w.commit()
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    try:
        assert proc.stdout.readline().strip() == "holding"
        work = [p for p in tmp_path.iterdir() if p.name.startswith(".ds.tmp-")]
        with pytest.raises(UserError, match=rf"in use by another yanami process \(pid {proc.pid}\)"):
            DatasetWriter(tmp_path / "ds", split="bench", generator=Generator(name="t"))
        assert len(work) == 1 and work[0].is_dir()  # the holder's work is not taken for a stale one
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    assert proc.returncode == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["ds"]
    write_synthetic(tmp_path / "other", 1, seed=1)  # a writer of another name was never in the way


def test_an_id_whose_hash_was_seen_is_a_duplicate_only_if_written(tmp_path: Path, monkeypatch) -> None:
    """The writer keeps 8-byte hashes of ids: a hit (every id hashing alike, here) is confirmed
    against the lines written, so distinct ids all go in and only a real repeat is refused."""
    from yanami.store._ids import SeenIds

    monkeypatch.setattr(SeenIds, "add", lambda self, h: True)
    with DatasetWriter(tmp_path / "ds", split="bench", generator=GEN, shard_size=2) as w:
        for k in range(5):
            d, images = synthetic_dialogue(k, seed=1)
            for data in images.values():
                w.add_image(data, ImageSource.USER)
            w.add_dialogue(d)
        with pytest.raises(ValueError, match="duplicate dialogue id"):
            w.add_dialogue(synthetic_dialogue(3, seed=1)[0])
        manifest = w.commit()
    assert manifest.counts.dialogues == 5
