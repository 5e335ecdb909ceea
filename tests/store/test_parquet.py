"""Parquet export loads in Hugging Face datasets, and imports back losslessly."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.helpers import snapshot
from yanami.errors import UserError
from yanami.store import Dataset, export_parquet, import_parquet, sha256_hex


def test_loads_with_hugging_face_datasets(built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    import datasets
    from PIL import Image

    files = export_parquet(built, tmp_path / "pq")
    hf = datasets.load_dataset(
        "parquet", data_files=[str(f) for f in files], split="train", cache_dir=str(tmp_path / "cache")
    )
    assert hf.num_rows == 8
    assert list(hf.features) == ["id", "scenario", "capabilities", "num_turns", "dialogue", "image_sha256", "images"]
    row = hf[0]
    first = next(iter(Dataset(built)))
    assert row["id"] == first.id
    assert isinstance(row["images"][0], Image.Image)
    assert row["images"][0].size == (first.images()[0].width, first.images()[0].height)
    assert row["image_sha256"][0] == first.images()[0].sha256
    assert json.loads(row["dialogue"])["id"] == first.id
    # The dataset card's header lets datasets find the files from the directory alone.
    by_dir = datasets.load_dataset(str(tmp_path / "pq"), cache_dir=str(tmp_path / "cache2"))
    assert by_dir["bench"].num_rows == 8


def test_round_trip_is_lossless(built: Path, tmp_path: Path) -> None:
    export_parquet(built, tmp_path / "pq")
    import_parquet(tmp_path / "pq", tmp_path / "back")
    # Same dialogues, same image hashes, same manifest: the directories are identical.
    assert snapshot(tmp_path / "back") == snapshot(built)


def test_cli_round_trip(cli: Callable[..., Any], built: Path, tmp_path: Path) -> None:
    r = cli("export", built, "--format", "parquet", "--out", tmp_path / "pq")
    assert r.code == 0, r.err
    r = cli("import", tmp_path / "pq", "--out", tmp_path / "back")
    assert r.code == 0, r.err
    assert snapshot(tmp_path / "back") == snapshot(built)
    r = cli("export", built, "--out", tmp_path / "pq")
    assert r.code == 2 and "already exists" in r.err
    r = cli("export", built, "--out", tmp_path / "pq", "--overwrite")
    assert r.code == 0


def test_small_shards(built: Path, tmp_path: Path) -> None:
    files = export_parquet(built, tmp_path / "pq", shard_bytes=1)
    assert [f.name for f in files] == [f"bench-{i:05d}-of-00008.parquet" for i in range(8)]
    import_parquet(tmp_path / "pq", tmp_path / "back")
    assert snapshot(tmp_path / "back") == snapshot(built)


def _rewrite(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    table = pq.read_table(path)
    rows = table.to_pylist()
    change(rows[0])
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path)


def test_import_rejects_tampered_images(built: Path, tmp_path: Path) -> None:
    (f,) = export_parquet(built, tmp_path / "pq")

    def tamper(row: dict[str, Any]) -> None:
        row["images"][0]["bytes"] = row["images"][0]["bytes"][:-10] + b"0123456789"

    _rewrite(f, tamper)
    with pytest.raises(UserError, match=r"row 0: images\.0: bytes do not match hash"):
        import_parquet(tmp_path / "pq", tmp_path / "back")
    assert not (tmp_path / "back").exists()


def test_import_rejects_a_missing_image(built: Path, tmp_path: Path) -> None:
    (f,) = export_parquet(built, tmp_path / "pq")

    def drop(row: dict[str, Any]) -> None:
        row["images"].pop()
        row["image_sha256"].pop()

    _rewrite(f, drop)
    with pytest.raises(UserError, match="references image"):
        import_parquet(tmp_path / "pq", tmp_path / "back")


def test_import_rejects_other_parquet(tmp_path: Path, cli: Callable[..., Any]) -> None:
    pq.write_table(pa.table({"x": [1]}), tmp_path / "other.parquet")
    r = cli("import", tmp_path / "other.parquet", "--out", tmp_path / "back")
    assert r.code == 2
    assert "not a yanami export" in r.err
    assert "Traceback" not in r.err


def test_export_refuses_to_replace_a_foreign_directory(built: Path, tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="refusing"):
        export_parquet(built, tmp_path / "out", overwrite=True)
    assert os.listdir(tmp_path / "out") == ["notes.txt"]


def test_hashes_in_the_export_are_the_image_bytes(built: Path, tmp_path: Path) -> None:
    (f,) = export_parquet(built, tmp_path / "pq")
    for row in pq.read_table(f).to_pylist():
        assert [sha256_hex(i["bytes"]) for i in row["images"]] == row["image_sha256"]
