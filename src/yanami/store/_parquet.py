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
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from yanami._lock import OutputLock, work_prefix
from yanami._parquet_pages import pages_over, pyarrow
from yanami.contract import Dialogue, UserError, open_regular, sha256_hex
from yanami.store._images import ImageProblem
from yanami.store._manifest import FORMAT_NAME, FORMAT_VERSION, MANIFEST, Generator
from yanami.store._reader import Dataset
from yanami.store._writer import DatasetWriter, move_into_place

META_KEY = b"yanami"
MAX_IMAGE_BYTES = 64 << 20
"""An image cell of an export larger than this is refused unread (a picture within the
store's pixel limit, PNG-compressed, is far smaller)."""
MAX_DIALOGUE_BYTES = 64 << 20
"""A dialogue cell (its JSON line) larger than this is refused unread."""
_CELL_CAPS = {"dialogue": MAX_DIALOGUE_BYTES, "image_sha256": 1024, "images": MAX_IMAGE_BYTES}
"""The columns an import reads, and the most bytes one cell of each may hold."""
_HELD = 4
"""What an import holds of a column at once, in units of its cell cap: one page, decompressed."""
SHARD_PATH = r"^dialogues/[A-Za-z0-9_-]+\.jsonl$"
SHARD_BYTES = 256 << 20
"""A new Parquet file starts once a file holds about this many bytes of images and text."""
ROW_GROUP_BYTES = 4 << 20
"""A row group ends once its rows hold about this many bytes of images and text, or at
`ROW_GROUP_ROWS` rows: a file's row groups (whose metadata its writer holds until it closes)
stay few, and one row group stays small enough to read whole."""
ROW_GROUP_ROWS = 1024
BATCH_ROWS = 64
"""An import reads at most this many rows at once (fewer where they are large)."""
STATISTICS = ["id", "family", "scenario", "num_turns"]
"""The columns with min/max statistics: the short ones (a dialogue's or an image's would put up
to 8 KB of its bytes in the file's metadata per row group)."""

HF_FEATURES = {
    "id": {"dtype": "string", "_type": "Value"},
    "family": {"dtype": "string", "_type": "Value"},
    "scenario": {"dtype": "string", "_type": "Value"},
    "capabilities": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"},
    "num_turns": {"dtype": "int32", "_type": "Value"},
    "dialogue": {"dtype": "string", "_type": "Value"},
    "image_sha256": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"},
    "images": {"feature": {"_type": "Image"}, "_type": "Sequence"},
}
"""The columns as Hugging Face ``Features`` (``Sequence`` is read as ``List`` by datasets ≥ 4)."""


class ExportMeta(BaseModel):
    """The ``yanami`` key of an export's Parquet schema metadata (the same in every file)."""

    model_config = ConfigDict(extra="forbid")

    format: str
    format_version: str
    schema_version: str
    split: str = Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")
    generator: Generator
    manifest: str | None = None
    """The exported dataset's ``manifest.json``, verbatim."""
    shards: list[tuple[Annotated[str, Field(pattern=SHARD_PATH)], Annotated[int, Field(ge=0)]]] | None = None
    """Its shards, in order, with the number of dialogues in each."""

    @model_validator(mode="after")
    def _distinct_shards(self) -> ExportMeta:
        names = [rel for rel, _ in self.shards or []]
        if len(set(names)) != len(names):
            raise ValueError("a shard is listed twice")
        return self


def _pyarrow() -> tuple[Any, Any]:
    return pyarrow("Parquet needs pyarrow: pip install 'yanami[hf]'")


def _schema(pa: Any, meta: ExportMeta) -> Any:
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    return pa.schema(
        [
            ("id", pa.string()),
            ("family", pa.string()),
            ("scenario", pa.string()),
            ("capabilities", pa.list_(pa.string())),
            ("num_turns", pa.int32()),
            ("dialogue", pa.string()),
            ("image_sha256", pa.list_(pa.string())),
            ("images", pa.list_(image)),
        ],
        metadata={
            b"huggingface": json.dumps({"info": {"features": HF_FEATURES}}).encode(),
            META_KEY: meta.model_dump_json().encode(),
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
        raise UserError(f"{out}: already exists (choose another path, or replace it with --overwrite)")
    if out.exists() and (not out.is_dir() or any(p.suffix not in (".parquet", ".md") for p in out.iterdir())):
        raise UserError(f"{out}: exists and does not hold a Parquet export; refusing to replace it")
    parent = out.absolute().parent
    if not parent.is_dir():
        raise UserError(f"{parent}: no such directory (yanami creates --out, not the folders above it)")
    m = ds.manifest
    meta = ExportMeta(
        format=FORMAT_NAME,
        format_version=FORMAT_VERSION,
        schema_version=m.schema_version,
        split=m.split,
        generator=m.generator,
        manifest=(ds.root / MANIFEST).read_text(encoding="utf-8", errors="replace"),
        shards=[(rel, _count_lines(path)) for rel, path in zip(m.shards, ds.shard_paths(), strict=True)],
    )
    schema = _schema(pa, meta)
    with OutputLock(out):  # one export per --out; what a killed one left is removed
        work = parent / f"{work_prefix(out)}{uuid.uuid4().hex[:8]}"
        work.mkdir()
        try:
            names = _write_shards(pa, pq, ds, work, schema, m.split, shard_bytes, on_dialogue)
            (work / "README.md").write_text(_card(m.split, len(names)), encoding="utf-8")
            move_into_place(work, out)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
    return [out / n for n in names]


def _count_lines(path: Path) -> int:
    """The dialogue lines of a shard (blank lines are not dialogues)."""
    with open(path, "rb") as f:
        return sum(1 for line in f if line.strip())


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

    held = 0  # bytes of images and text in ``rows``

    def flush() -> None:
        nonlocal rows, held
        if rows:
            assert writer is not None
            writer.write_table(pa.Table.from_pylist(rows, schema=schema), row_group_size=len(rows))
            rows, held = [], 0

    for _, _, line, d in ds.records():
        if writer is None or size >= shard_bytes:
            flush()
            if writer is not None:
                writer.close()
            parts.append(work / f"part-{len(parts):05d}.parquet")
            writer = _writer(pq, parts[-1], schema)
            size = 0
        hashes: list[str] = []
        images: list[dict[str, Any]] = []
        for p in d.images():
            if p.sha256 not in hashes:
                hashes.append(p.sha256)
                data = ds.image_bytes(p)
                images.append({"bytes": data, "path": f"{p.sha256}.{p.format.value}"})
                size += len(data)
                held += len(data)
        size += len(line)
        held += len(line)
        rows.append(
            {
                "id": d.id,
                "family": d.family,
                "scenario": d.group,
                "capabilities": [c.value for c in d.capabilities],
                "num_turns": len(d.turns),
                "dialogue": line,  # the shard's line as it is, so an import rebuilds it byte for byte
                "image_sha256": hashes,
                "images": images,
            }
        )
        if held >= ROW_GROUP_BYTES or len(rows) >= ROW_GROUP_ROWS:
            flush()
        if on_dialogue is not None:
            on_dialogue()
    if writer is None:  # an empty dataset still gets one (empty) file
        parts.append(work / "part-00000.parquet")
        writer = _writer(pq, parts[-1], schema)
    flush()
    writer.close()
    names = []
    for i, part in enumerate(parts):
        name = f"{split}-{i:05d}-of-{len(parts):05d}.parquet"
        part.rename(work / name)
        names.append(name)
    return names


def _writer(pq: Any, path: Path, schema: Any) -> Any:
    return pq.ParquetWriter(path, schema, compression="zstd", write_statistics=STATISTICS)


def _card(split: str, n: int) -> str:
    return (
        "---\nconfigs:\n- config_name: default\n  data_files:\n"
        f"  - split: {split}\n    path: {split}-*.parquet\n---\n\n"
        f"# yanami dataset export\n\n{n} Parquet file(s), one row per dialogue. Columns: `id`, `family`,\n"
        "`scenario` (a YANAMI scenario, or a WEAVE or IMUG-Bench domain), `capabilities`, `num_turns`,\n"
        "`dialogue` (the full dialogue as yanami JSON), `image_sha256`\n"
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
        raise UserError(
            f"{path}: no .parquet files (a Parquet export; for another source name its kind: "
            "yanami import weave|imug SRC --out DIR)"
        )
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
    the result is exactly as trustworthy as a freshly written dataset. The files are read a
    row group at a time, every cell under a cap (`MAX_DIALOGUE_BYTES`, `MAX_IMAGE_BYTES`,
    checked from the page headers before a page is read; see `_rows`).
    """
    _, pq = _pyarrow()
    files = parquet_files(Path(source))
    metas = [_file_meta(pq, f) for f in files]
    first = metas[0]
    for f, meta in zip(files, metas, strict=True):
        if meta != first:
            raise UserError(f"{f}: comes from another dataset than {files[0].name} (its yanami metadata differ)")
    rows = sum(_num_rows(pq, f) for f in files)
    # The original shards and manifest, where the rows are all the export holds.
    exact = first.shards is not None and sum(n for _, n in first.shards) == rows
    with DatasetWriter(
        out,
        split=first.split,
        generator=first.generator,
        overwrite=overwrite,
        shard_layout=first.shards if exact else None,
        keep_manifest=first.manifest if exact else None,
    ) as w:
        for f in files:
            for rowno, row in _rows(pq, f):
                _import_row(w, f, rowno, row)
                if on_dialogue is not None:
                    on_dialogue()
    return Path(out)


def _file_meta(pq: Any, f: Path) -> ExportMeta:
    try:
        schema = pq.read_schema(f)
    except Exception as exc:
        raise UserError(f"{f}: not a readable Parquet file ({exc})") from None
    raw = (schema.metadata or {}).get(META_KEY)
    if raw is None:
        raise UserError(f"{f}: not a yanami export (no {META_KEY.decode()!r} metadata)")
    try:
        obj = json.loads(raw)
    except ValueError as exc:  # not JSON, or not UTF-8
        raise UserError(f"{f}: the {META_KEY.decode()!r} metadata is not JSON ({exc})") from None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT_NAME:
        found = obj.get("format") if isinstance(obj, dict) else obj
        raise UserError(f"{f}: not a yanami export (format {found!r})")
    try:
        meta = ExportMeta.model_validate(obj)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(map(str, err["loc"])) or "-"
        raise UserError(f"{f}: {META_KEY.decode()} metadata: {loc}: {err['msg']}") from None
    missing = {"dialogue", "image_sha256", "images"}.difference(schema.names)
    if missing:
        raise UserError(f"{f}: missing column(s) {', '.join(sorted(missing))}")
    return meta


def _num_rows(pq: Any, f: Path) -> int:
    try:
        return int(pq.ParquetFile(f).metadata.num_rows)
    except Exception as exc:
        raise UserError(f"{f}: not a readable Parquet file ({exc})") from None


def _rows(pq: Any, f: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The rows of a file, a row group at a time and a few rows per batch, each row's cells
    copied out one row at a time; a corrupt page is a one-line UserError.

    Before a row group is read, the page headers of its columns are (`pages_over`): a page
    that would decompress to more than its column's cap allows refuses the file unread, so a
    small compressed file whose cells decompress to gigabytes costs what its pages may hold.
    """
    rowno = 0
    try:
        heads = open(open_regular(f), "rb")  # noqa: SIM115 (closed below, also when the generator is)
    except OSError as exc:
        raise UserError(f"{f}: cannot be read ({exc.strerror})") from None
    with heads:
        try:
            # pages stream through a small buffer: the file's compressed bytes are never all read at once
            pf = pq.ParquetFile(f, buffer_size=1 << 20)
            groups = pf.num_row_groups
        except Exception as exc:  # pyarrow raises ArrowException subclasses and OSError
            raise UserError(f"{f}: not a readable Parquet file ({exc})") from None
        for i in range(groups):
            try:
                meta = pf.metadata.row_group(i)
                problem = next(
                    (
                        why
                        for column, cap in _CELL_CAPS.items()
                        if (why := pages_over(heads, meta, [column], cap, held=_HELD)) is not None
                    ),
                    None,
                )
            except Exception as exc:
                raise UserError(f"{f}: row {rowno} onwards cannot be read ({_first_line(exc)})") from None
            if problem is not None:
                raise UserError(f"{f}: row {rowno} onwards cannot be read ({problem})")
            # as many rows per batch as hold about one image's cap on average: a few cells, not the file
            size = max(1, min(BATCH_ROWS, MAX_IMAGE_BYTES * meta.num_rows // max(1, meta.total_byte_size)))
            batches = pf.iter_batches(batch_size=size, row_groups=[i], columns=list(_CELL_CAPS), use_threads=False)
            while True:
                try:
                    batch = next(batches, None)
                except Exception as exc:
                    raise UserError(f"{f}: row {rowno} onwards cannot be read ({_first_line(exc)})") from None
                if batch is None:
                    break
                for r in range(batch.num_rows):
                    try:
                        row = batch.slice(r, 1).to_pylist()[0]
                    except Exception as exc:
                        raise UserError(f"{f}: row {rowno} cannot be read ({_first_line(exc)})") from None
                    yield rowno, row
                    rowno += 1


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _import_row(w: DatasetWriter, f: Path, rowno: int, row: dict[str, Any]) -> None:
    where = f"{f}: row {rowno}"
    text = row["dialogue"] or ""
    if len(text) > MAX_DIALOGUE_BYTES:  # characters: at least as many bytes
        raise UserError(f"{where}: dialogue: over the limit of {MAX_DIALOGUE_BYTES} bytes")
    try:
        d = Dialogue.model_validate_json(text, strict=True)
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
        if len(data) > MAX_IMAGE_BYTES:
            raise UserError(f"{where}: images.{k}: {len(data)} bytes, over the limit of {MAX_IMAGE_BYTES}")
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
        # The text as exported (one line, validated above), so the shard comes back byte for byte.
        w.add_dialogue(d, line=text if "\n" not in text else None)
    except ValueError as exc:
        raise UserError(f"{where}: {exc}") from None
