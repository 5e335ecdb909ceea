"""Reading an image pool: a folder, a Parquet export or WebDataset tars, as a stream of entries.

A pool is read, never trusted: each entry carries the raw bytes of one image file (or why
they could not be had) and the group it belongs to. Decoding, limits and duplicates are the
caller's (`yanami.construct.prepare`), so every reader yields the same kind of entry:

- **folder**: ``POOL/GROUP/…/file`` is an image of group GROUP; a file directly in POOL is a
  group of its own (named by the file). ``POOL/groups.jsonl`` instead names the groups:
  ``{"group": "g1", "images": ["a.png", "sub/b.png"], "scenario": <a scenario>}`` per line (paths
  relative to POOL; ``scenario`` optional). Hidden files are skipped; no path leaves POOL.
- **parquet**: a ``.parquet`` file, or a folder of them (``data/`` included, as Hugging Face
  exports are laid out). The image column holds bytes, ``{"bytes": …}`` structs (the
  ``datasets`` Image feature) or lists of them (a list is a group). A ``group`` column names
  groups (else each row is one), a ``scenario`` column routes them.
- **webdataset**: a ``.tar`` file, or a folder of them. A member ``KEY.png`` (``.jpg``,
  ``.jpeg``, ``.webp``) is an image of sample KEY; the sample is the group unless its
  ``KEY.json`` names ``"group"`` (and optionally ``"scenario"``). Members are read, never
  extracted.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from yanami import _json
from yanami._files import read_regular
from yanami.errors import UserError

PoolFormat = Literal["auto", "folder", "parquet", "webdataset"]
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""A pool file larger than this is refused unread."""
GROUPS_FILE = "groups.jsonl"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")


@dataclass(frozen=True)
class PoolEntry:
    """One image of a pool, as read."""

    source: str
    """Where it came from: a path relative to the pool, ``FILE#row=N[:k]`` or ``TAR:MEMBER``."""
    group: str
    data: bytes | None
    """The file's bytes; None when they could not be read (``problem`` says why)."""
    problem: str | None = None
    scenario: str | None = None
    """The scenario the pool's own metadata routes the group to, if any."""

    def __post_init__(self) -> None:
        # A file name that is not UTF-8 (read as lone surrogates) is recorded escaped (``\xNN``),
        # so every record, label and prompt can hold it; the bytes were read already.
        object.__setattr__(self, "source", printable_name(self.source))
        object.__setattr__(self, "group", printable_name(self.group))


def printable_name(name: str) -> str:
    r"""``name`` with the bytes a non-UTF-8 file name decoded to as lone surrogates written ``\xNN``."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def pool_format(pool: Path, fmt: PoolFormat = "auto") -> PoolFormat:
    """Which reader a pool needs (``auto``: from the suffix, or what a folder holds)."""
    if not pool.exists():
        raise UserError(f"{pool}: no such file or folder")
    if fmt != "auto":
        return fmt
    if pool.is_file():
        if pool.suffix == ".parquet":
            return "parquet"
        if pool.suffix == ".tar":
            return "webdataset"
        raise UserError(f"{pool}: a pool file must be .parquet or .tar (or give a folder of images)")
    if (pool / GROUPS_FILE).is_file():
        return "folder"
    if _files(pool, ".parquet"):
        return "parquet"
    if _files(pool, ".tar"):
        return "webdataset"
    return "folder"


def _files(pool: Path, suffix: str) -> list[Path]:
    found = sorted(p for p in pool.glob(f"*{suffix}") if p.is_file())
    return found or sorted(p for p in pool.glob(f"data/*{suffix}") if p.is_file())


def read_pool(
    pool: Path,
    fmt: PoolFormat = "auto",
    *,
    image_column: str | None = None,
    group_column: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Iterator[PoolEntry]:
    """Every entry of a pool, in a fixed order (see the module docstring)."""
    kind = pool_format(pool, fmt)
    if kind == "folder":
        if not pool.is_dir():
            raise UserError(f"{pool}: not a folder")
        yield from _folder(pool, max_bytes)
    elif kind == "parquet":
        for f in [pool] if pool.is_file() else _files(pool, ".parquet"):
            yield from _parquet(f, pool, image_column, group_column, max_bytes)
    else:
        for f in [pool] if pool.is_file() else _files(pool, ".tar"):
            yield from _webdataset(f, pool, max_bytes)


def _rel(path: Path, pool: Path) -> str:
    return path.relative_to(pool).as_posix() if path != pool else path.name


# folder ---------------------------------------------------------------------------------------


def _read_file(path: Path, max_bytes: int) -> tuple[bytes | None, str | None]:
    try:
        size = path.stat().st_size
        if size > max_bytes:
            return None, f"{size} bytes is over the limit of {max_bytes}"
        return read_regular(path, max_bytes), None
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror})"


def _inside(pool: Path, rel: str) -> Path | None:
    """``pool/rel`` when it stays inside the pool (symbolic links resolved), else None."""
    root = pool.resolve()
    p = (pool / rel).resolve()
    return p if p.is_relative_to(root) and p != root else None


def _folder(pool: Path, max_bytes: int) -> Iterator[PoolEntry]:
    groups_file = pool / GROUPS_FILE
    if groups_file.is_file():
        yield from _listed(pool, groups_file, max_bytes)
        return
    root = pool.resolve()
    for path in sorted(
        p for p in pool.rglob("*") if not any(part.startswith(".") for part in p.relative_to(pool).parts)
    ):
        if path.is_dir():
            continue
        rel = path.relative_to(pool)
        if not path.resolve().is_relative_to(root):
            yield PoolEntry(rel.as_posix(), _group_of(rel), None, "a link that leaves the pool (not read)")
            continue
        data, problem = _read_file(path, max_bytes)
        yield PoolEntry(rel.as_posix(), _group_of(rel), data, problem)


def _group_of(rel: Path) -> str:
    return rel.parts[0] if len(rel.parts) > 1 else rel.name


def _listed(pool: Path, groups_file: Path, max_bytes: int) -> Iterator[PoolEntry]:
    for n, line in _json.lines(groups_file.read_text(encoding="utf-8", errors="replace")):
        where = f"{groups_file}:{n}"
        try:
            row = json.loads(line)
        except _json.ERRORS as exc:
            raise UserError(f"{where}: {_json.problem(exc)}") from None
        if not isinstance(row, dict):
            raise UserError(f"{where}: expected an object with group and images")
        group, images, scenario = row.get("group"), row.get("images"), row.get("scenario")
        if not isinstance(group, str) or not group:
            raise UserError(f"{where}: group: a non-empty string is required")
        if not isinstance(images, list) or not images or not all(isinstance(i, str) for i in images):
            raise UserError(f"{where}: images: a non-empty list of paths is required")
        if scenario is not None and not isinstance(scenario, str):
            raise UserError(f"{where}: scenario: a string is expected")
        for rel in images:
            path = _inside(pool, rel)
            if path is None:
                raise UserError(f"{where}: images: {rel!r} is not a path inside {pool}")
            if not path.is_file():
                yield PoolEntry(rel, group, None, "no such file", scenario)
                continue
            data, problem = _read_file(path, max_bytes)
            yield PoolEntry(rel, group, data, problem, scenario)


# parquet --------------------------------------------------------------------------------------

_IMAGE_COLUMNS = ("image", "images", "img", "jpg", "png")


def _parquet(
    path: Path, pool: Path, image_column: str | None, group_column: str | None, max_bytes: int
) -> Iterator[PoolEntry]:
    try:
        import pyarrow.parquet as pq  # type: ignore[import-untyped]
    except ImportError:
        raise UserError("reading a Parquet pool needs the hf extra: pip install 'yanami[hf]'") from None
    name = _rel(path, pool)
    try:
        f = pq.ParquetFile(path)
        columns = f.schema_arrow.names
    except Exception as exc:  # pyarrow raises many types for a file that is not Parquet
        yield PoolEntry(name, name, None, f"not a readable Parquet file ({exc})")
        return
    image = image_column or next((c for c in _IMAGE_COLUMNS if c in columns), None)
    if image is None or image not in columns:
        raise UserError(f"{path}: no image column {image_column or '(image, images, img)'}; columns: {columns}")
    group = group_column or ("group" if "group" in columns else None)
    if group is not None and group not in columns:
        raise UserError(f"{path}: no group column {group!r}; columns: {columns}")
    wanted = [c for c in (image, group, "scenario" if "scenario" in columns else None) if c]
    row = 0
    try:
        for batch in f.iter_batches(batch_size=64, columns=wanted):
            for rec in batch.to_pylist():
                where = f"{name}#row={row}"
                gname = str(rec[group]) if group and rec.get(group) is not None else where
                scenario = rec.get("scenario") if isinstance(rec.get("scenario"), str) else None
                value = rec[image]
                items = value if isinstance(value, list) else [value]
                for k, item in enumerate(items):
                    source = f"{where}:{k}" if isinstance(value, list) else where
                    data, problem = _cell_bytes(item, max_bytes)
                    yield PoolEntry(source, gname, data, problem, scenario)
                row += 1
    except Exception as exc:  # a truncated or corrupt file fails mid-way: what was read stands
        yield PoolEntry(f"{name}#row={row}", f"{name}#row={row}", None, f"the Parquet file breaks off here ({exc})")


def _cell_bytes(item: Any, max_bytes: int) -> tuple[bytes | None, str | None]:
    if isinstance(item, dict):
        item = item.get("bytes")
    if item is None:
        return None, "the image cell is empty"
    if not isinstance(item, bytes):
        return None, f"the image cell holds {type(item).__name__}, not bytes"
    if len(item) > max_bytes:
        return None, f"{len(item)} bytes is over the limit of {max_bytes}"
    return item, None


# webdataset -----------------------------------------------------------------------------------


def _webdataset(path: Path, pool: Path, max_bytes: int) -> Iterator[PoolEntry]:
    name = _rel(path, pool)
    samples: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    try:
        with tarfile.open(path, mode="r:*") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                base = member.name.rsplit("/", 1)[-1]
                if base.startswith("."):
                    continue
                prefix = member.name[: len(member.name) - len(base)]
                key, dot, ext = base.partition(".")
                key = prefix + key
                ext = "." + ext.lower() if dot else ""
                if key not in samples:
                    samples[key] = {"images": [], "meta": None}
                    order.append(key)
                source = f"{name}:{member.name}"
                if ext.endswith(IMAGE_SUFFIXES):
                    if member.size > max_bytes:
                        samples[key]["images"].append((source, None, f"{member.size} bytes is over the limit"))
                        continue
                    fh = tar.extractfile(member)
                    data = fh.read() if fh is not None else None
                    samples[key]["images"].append((source, data, None if data is not None else "unreadable"))
                elif ext == ".json" and member.size <= 1 << 20:
                    fh = tar.extractfile(member)
                    try:
                        meta = json.loads(fh.read()) if fh is not None else None
                    except ValueError:
                        meta = None
                    samples[key]["meta"] = meta if isinstance(meta, dict) else None
    except (tarfile.TarError, OSError, EOFError) as exc:
        # what was read before the break stands; the break itself is one recorded rejection
        yield from _samples(samples, order)
        yield PoolEntry(name, name, None, f"not a readable tar file ({exc})")
        return
    yield from _samples(samples, order)


def _samples(samples: dict[str, dict[str, Any]], order: list[str]) -> Iterator[PoolEntry]:
    for key in order:
        meta = samples[key]["meta"] or {}
        named = meta.get("group")
        group = named if isinstance(named, str) and named else key
        scenario = meta.get("scenario") if isinstance(meta.get("scenario"), str) else None
        for source, data, problem in samples[key]["images"]:
            yield PoolEntry(source, group, data, problem, scenario)
