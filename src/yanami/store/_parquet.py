"""Parquet export and import: one row per dialogue, images embedded as Hugging Face ``Image`` values.

The shards load with ``datasets.load_dataset("parquet", data_files=...)``, the images
decoding as PIL images, and `import_parquet` turns them back into a dataset directory
with the same image hashes and the same dialogues, byte for byte.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from yanami.errors import UserError
from yanami.schema import Dialogue
from yanami.store._images import ImageProblem, sha256_hex
from yanami.store._manifest import FORMAT_NAME, FORMAT_VERSION, Generator
from yanami.store._reader import Dataset
from yanami.store._writer import DatasetWriter, move_into_place

META_KEY = b"yanami"
SHARD_BYTES = 256 << 20
"""A new Parquet file starts once a file holds about this many bytes of images and text."""
ROW_GROUP_ROWS = 64

HF_FEATURES = {
    "id": {"dtype": "string", "_type": "Value"},
    "scenario": {"dtype": "string", "_type": "Value"},
    "capabilities": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"},
    "num_turns": {"dtype": "int32", "_type": "Value"},
    "dialogue": {"dtype": "string", "_type": "Value"},
    "image_sha256": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"},
    "images": {"feature": {"_type": "Image"}, "_type": "Sequence"},
}
"""The columns as Hugging Face ``Features`` (``Sequence`` is read as ``List`` by datasets ≥ 4)."""


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError("Parquet needs pyarrow: pip install 'yanami[hf]'") from None
    return pa, pq


def _schema(pa: Any, meta: dict[str, Any]) -> Any:
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    return pa.schema(
        [
            ("id", pa.string()),
            ("scenario", pa.string()),
            ("capabilities", pa.list_(pa.string())),
            ("num_turns", pa.int32()),
            ("dialogue", pa.string()),
            ("image_sha256", pa.list_(pa.string())),
            ("images", pa.list_(image)),
        ],
        metadata={
            b"huggingface": json.dumps({"info": {"features": HF_FEATURES}}).encode(),
            META_KEY: json.dumps(meta, sort_keys=True).encode(),
        },
    )


def export_parquet(
    source: str | Path,
    out: str | Path,
    *,
    overwrite: bool = False,
    shard_bytes: int = SHARD_BYTES,
    on_dialogue: Callable[[], None] | None = None,
) -> list[Path]:
    """Write a dataset directory as Parquet files into the directory ``out``.

    ``out`` appears only when every file is written. Returns the files, named
    ``{split}-{i:05d}-of-{n:05d}.parquet``.
    """
    pa, pq = _pyarrow()
    ds = Dataset(source)
    out = Path(out)
    if out.exists() and not overwrite:
        raise UserError(f"{out}: already exists (choose another path, or overwrite it)")
    if out.exists() and (not out.is_dir() or any(p.suffix not in (".parquet", ".md") for p in out.iterdir())):
        raise UserError(f"{out}: exists and does not hold a Parquet export; refusing to replace it")
    m = ds.manifest
    meta = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "schema_version": m.schema_version,
        "split": m.split,
        "generator": m.generator.model_dump(mode="json"),
    }
    schema = _schema(pa, meta)
    work = out.absolute().parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    work.mkdir()
    try:
        names = _write_shards(pa, pq, ds, work, schema, m.split, shard_bytes, on_dialogue)
        (work / "README.md").write_text(_card(m.split, len(names)), encoding="utf-8")
        move_into_place(work, out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return [out / n for n in names]


def _write_shards(
    pa: Any,
    pq: Any,
    ds: Dataset,
    work: Path,
    schema: Any,
    split: str,
    shard_bytes: int,
    on_dialogue: Callable[[], None] | None,
) -> list[str]:
    parts: list[Path] = []
    writer = None
    size = 0
    rows: list[dict[str, Any]] = []

    def flush() -> None:
        nonlocal rows
        if rows:
            assert writer is not None
            writer.write_table(pa.Table.from_pylist(rows, schema=schema))
            rows = []

    for d in ds:
        if writer is None or size >= shard_bytes:
            flush()
            if writer is not None:
                writer.close()
            parts.append(work / f"part-{len(parts):05d}.parquet")
            writer = pq.ParquetWriter(parts[-1], schema, compression="zstd")
            size = 0
        line = d.model_dump_json()
        hashes: list[str] = []
        images: list[dict[str, Any]] = []
        for p in d.images():
            if p.sha256 not in hashes:
                hashes.append(p.sha256)
                data = ds.image_bytes(p)
                images.append({"bytes": data, "path": f"{p.sha256}.{p.format.value}"})
                size += len(data)
        size += len(line)
        rows.append(
            {
                "id": d.id,
                "scenario": d.scenario.value,
                "capabilities": [c.value for c in d.capabilities],
                "num_turns": len(d.turns),
                "dialogue": line,
                "image_sha256": hashes,
                "images": images,
            }
        )
        if len(rows) >= ROW_GROUP_ROWS:
            flush()
        if on_dialogue is not None:
            on_dialogue()
    if writer is None:  # an empty dataset still gets one (empty) file
        parts.append(work / "part-00000.parquet")
        writer = pq.ParquetWriter(parts[-1], schema, compression="zstd")
    flush()
    writer.close()
    names = []
    for i, p in enumerate(parts):
        name = f"{split}-{i:05d}-of-{len(parts):05d}.parquet"
        p.rename(work / name)
        names.append(name)
    return names


def _card(split: str, n: int) -> str:
    return (
        "---\nconfigs:\n- config_name: default\n  data_files:\n"
        f"  - split: {split}\n    path: {split}-*.parquet\n---\n\n"
        f"# yanami dataset export\n\n{n} Parquet file(s), one row per dialogue. Columns: `id`, `scenario`,\n"
        "`capabilities`, `num_turns`, `dialogue` (the full dialogue as yanami JSON), `image_sha256`\n"
        "(the dialogue's distinct images, in order of first appearance) and `images` (their bytes, as\n"
        "Hugging Face `Image` values). `yanami import` turns this back into a dataset directory.\n"
    )


def parquet_files(path: Path) -> list[Path]:
    """The Parquet files of an export directory (or a single file), in order."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise UserError(f"{path}: no such file or directory")
    files = sorted(p for p in path.iterdir() if p.suffix == ".parquet" and p.is_file())
    if not files:
        raise UserError(f"{path}: no .parquet files")
    return files


def import_parquet(
    source: str | Path,
    out: str | Path,
    *,
    overwrite: bool = False,
    on_dialogue: Callable[[], None] | None = None,
) -> Path:
    """Turn a Parquet export back into a dataset directory at ``out``.

    Every image's bytes are hashed and decoded again, and every dialogue validated, so
    the result is exactly as trustworthy as a freshly written dataset.
    """
    _, pq = _pyarrow()
    files = parquet_files(Path(source))
    metas = [_file_meta(pq, f) for f in files]
    first = metas[0]
    for f, meta in zip(files, metas, strict=True):
        if (meta["split"], meta["generator"]) != (first["split"], first["generator"]):
            raise UserError(f"{f}: comes from another dataset than {files[0].name} (split or generator differ)")
    generator = Generator.model_validate(first["generator"])
    with DatasetWriter(out, split=first["split"], generator=generator, overwrite=overwrite) as w:
        for f in files:
            for rowno, row in _rows(pq, f):
                _import_row(w, f, rowno, row)
                if on_dialogue is not None:
                    on_dialogue()
    return Path(out)


def _file_meta(pq: Any, f: Path) -> dict[str, Any]:
    try:
        schema = pq.read_schema(f)
    except Exception as exc:
        raise UserError(f"{f}: not a readable Parquet file ({exc})") from None
    raw = (schema.metadata or {}).get(META_KEY)
    if raw is None:
        raise UserError(f"{f}: not a yanami export (no {META_KEY.decode()!r} metadata)")
    meta: dict[str, Any] = json.loads(raw)
    if meta.get("format") != FORMAT_NAME:
        raise UserError(f"{f}: not a yanami export (format {meta.get('format')!r})")
    missing = {"dialogue", "image_sha256", "images"}.difference(schema.names)
    if missing:
        raise UserError(f"{f}: missing column(s) {', '.join(sorted(missing))}")
    return meta


def _rows(pq: Any, f: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    rowno = 0
    pf = pq.ParquetFile(f)
    for batch in pf.iter_batches(batch_size=ROW_GROUP_ROWS, columns=["dialogue", "image_sha256", "images"]):
        for row in batch.to_pylist():
            yield rowno, row
            rowno += 1


def _import_row(w: DatasetWriter, f: Path, rowno: int, row: dict[str, Any]) -> None:
    where = f"{f}: row {rowno}"
    try:
        d = Dialogue.model_validate_json(row["dialogue"] or "", strict=True)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(map(str, err["loc"])) or "-"
        raise UserError(f"{where}: dialogue: {loc}: {err['msg']}") from None
    hashes, images = row["image_sha256"] or [], row["images"] or []
    if len(hashes) != len(images):
        raise UserError(f"{where}: {len(hashes)} hashes but {len(images)} images")
    declared = {p.sha256: p for p in d.images()}
    for k, (sha, image) in enumerate(zip(hashes, images, strict=True)):
        data = (image or {}).get("bytes")
        if data is None:
            raise UserError(f"{where}: images.{k}: no bytes")
        if sha256_hex(data) != sha:
            raise UserError(f"{where}: images.{k}: bytes do not match hash {sha}")
        p = declared.get(sha)
        if p is None:
            raise UserError(f"{where}: images.{k}: image {sha} is not referenced by the dialogue")
        try:
            part = w.add_image(data, source=p.source)
        except ImageProblem as exc:
            raise UserError(f"{where}: images.{k}: {exc}") from None
        if (p.format, p.width, p.height) != (part.format, part.width, part.height):
            raise UserError(f"{where}: images.{k}: image {sha} is not what the dialogue declares")
    missing = set(declared).difference(hashes)
    if missing:
        raise UserError(f"{where}: the dialogue references image(s) not in the row: {sorted(missing)[0]}")
    try:
        w.add_dialogue(d)
    except ValueError as exc:
        raise UserError(f"{where}: {exc}") from None
