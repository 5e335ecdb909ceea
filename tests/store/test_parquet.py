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
from yanami.contract import UserError, sha256_hex
from yanami.store import Dataset, DatasetWriter, Generator, export_parquet, import_parquet
from yanami.synthetic import write_synthetic


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
    columns = ["id", "family", "scenario", "capabilities", "num_turns", "dialogue", "image_sha256", "images"]
    assert list(hf.features) == columns
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


def test_world_bench_round_trip_is_byte_identical(world_bench: Path, tmp_path: Path, cli: Callable[..., Any]) -> None:
    # The world's generator params are not in sorted order: the re-imported manifest kept
    # them sorted, and so had another SHA-256 (another bench identity) than the original.
    r = cli("export", world_bench, "--out", tmp_path / "pq")
    assert r.code == 0, r.err
    r = cli("import", tmp_path / "pq", "--out", tmp_path / "back")
    assert r.code == 0, r.err
    assert snapshot(tmp_path / "back") == snapshot(world_bench)


def test_round_trip_keeps_the_shard_layout(tmp_path: Path) -> None:
    write_synthetic(tmp_path / "ds", 5, seed=4)
    # Rewrite it with two dialogues per shard and the lines in another (valid) key order.
    ds = Dataset(tmp_path / "ds")
    with DatasetWriter(
        tmp_path / "odd", split="train", generator=Generator(name="x", params={"z": 1, "a": 2}), shard_size=2
    ) as w:
        for d in ds:
            for p in d.images():
                w.add_image(ds.image_bytes(p), p.source)
            obj = json.loads(d.model_dump_json())
            w.add_dialogue(d, line=json.dumps(dict(reversed(obj.items()))))
    assert len(Dataset(tmp_path / "odd").manifest.shards) == 3
    export_parquet(tmp_path / "odd", tmp_path / "pq", shard_bytes=1)
    import_parquet(tmp_path / "pq", tmp_path / "back")
    assert snapshot(tmp_path / "back") == snapshot(tmp_path / "odd")


def _with_meta(f: Path, meta: bytes) -> None:
    table = pq.read_table(f)
    pq.write_table(table.replace_schema_metadata({**table.schema.metadata, b"yanami": meta}), f)


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        (b"{not json", "the 'yanami' metadata is not JSON"),
        (b"\xff\xfe", "the 'yanami' metadata is not JSON"),
        (b"[1, 2]", "not a yanami export"),
        (b'{"format": "yanami-dataset"}', "yanami metadata: format_version: Field required"),
        (
            b'{"format": "yanami-dataset", "format_version": "1.0", "schema_version": "1.0", '
            b'"split": "Bad Split", "generator": {"name": "x"}}',
            "yanami metadata: split: String should match pattern",
        ),
        (
            b'{"format": "yanami-dataset", "format_version": "1.0", "schema_version": "1.0", '
            b'"split": "bench", "generator": {"name": 7}}',
            "yanami metadata: generator.name: Input should be a valid string",
        ),
        (
            b'{"format": "yanami-dataset", "format_version": "1.0", "schema_version": "1.0", '
            b'"split": "bench", "generator": {"name": "x"}, "shards": [["../x.jsonl", 8]]}',
            "yanami metadata: shards.0.0: String should match pattern",
        ),
        (
            b'{"format": "yanami-dataset", "format_version": "1.0", "schema_version": "1.0", '
            b'"split": "bench", "generator": {"name": "x"}, '
            b'"shards": [["dialogues/a.jsonl", 4], ["dialogues/a.jsonl", 4]]}',
            "yanami metadata: -: Value error, a shard is listed twice",
        ),
    ],
)
def test_import_of_bad_metadata_is_one_line(
    built: Path, tmp_path: Path, cli: Callable[..., Any], meta: bytes, expected: str
) -> None:
    (f,) = export_parquet(built, tmp_path / "pq")
    _with_meta(f, meta)
    r = cli("import", tmp_path / "pq", "--out", tmp_path / "back")
    assert r.code == 2
    assert expected in r.err and str(f) in r.err
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
    assert not (tmp_path / "back").exists()


def test_import_of_a_corrupt_page_is_one_line(built: Path, tmp_path: Path, cli: Callable[..., Any]) -> None:
    (f,) = export_parquet(built, tmp_path / "pq")
    col = pq.ParquetFile(f).metadata.row_group(0).column(5)  # the dialogue column's first page
    raw = bytearray(f.read_bytes())
    start = col.data_page_offset
    raw[start : start + 64] = b"\xff" * 64
    f.write_bytes(bytes(raw))
    r = cli("import", tmp_path / "pq", "--out", tmp_path / "back")
    assert r.code == 2
    assert r.err.startswith(f"error: {f}: row 0 onwards cannot be read (")
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
    assert not (tmp_path / "back").exists() and list(tmp_path.iterdir()) == [tmp_path / "pq"]


def test_export_under_a_missing_folder_is_refused(built: Path, tmp_path: Path, cli: Callable[..., Any]) -> None:
    # Like `build --out` and `import --out`: yanami creates --out, never the folders above it.
    missing = tmp_path / "missing"
    refused = f"error: {missing}: no such directory (yanami creates --out, not the folders above it)"
    r = cli("export", built, "--out", missing / "pq")
    assert (r.code, r.err.strip()) == (2, refused)
    export_parquet(built, tmp_path / "pq")
    r = cli("import", tmp_path / "pq", "--out", missing / "ds")
    assert (r.code, r.err.strip()) == (2, refused)
    r = cli("build", "--out", missing / "ds", "--preset", "tiny")
    assert (r.code, r.err.strip()) == (2, refused)
    assert not missing.exists()


def test_empty_dataset_round_trip(tmp_path: Path) -> None:
    write_synthetic(tmp_path / "ds", 0, seed=1)
    export_parquet(tmp_path / "ds", tmp_path / "pq")
    import_parquet(tmp_path / "pq", tmp_path / "back")
    assert snapshot(tmp_path / "back") == snapshot(tmp_path / "ds")


def test_export_import_and_build_refuse_an_output_another_process_writes(
    built: Path, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    # The lock is the one a writer holds (flock: a second descriptor conflicts, in this process too).
    from yanami._lock import OutputLock

    export_parquet(built, tmp_path / "pq")
    for name, args in (
        ("pq2", ("export", built, "--out")),
        ("back", ("import", tmp_path / "pq", "--out")),
        ("ds", ("build", "--preset", "tiny", "--out")),
    ):
        with OutputLock(tmp_path / name):
            (tmp_path / f".{name}.tmp-123-abcdef01").mkdir()  # the holder's work: not the refused one's to remove
            r = cli(*args, tmp_path / name)
            assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
            assert f"{tmp_path / name} is in use by another yanami process (pid {os.getpid()})" in r.err
            assert (tmp_path / f".{name}.tmp-123-abcdef01").is_dir() and not (tmp_path / name).exists()
        r = cli(*args, tmp_path / name)  # free again: the work left behind is a killed writer's now
        assert r.code == 0, r.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["back", "ds", "pq", "pq2"]  # no lock, no work left
