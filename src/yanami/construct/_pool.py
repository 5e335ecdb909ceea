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
  ``KEY.json`` names ``"group"`` (and optionally ``"scenario"``). A sample's members are
  consecutive, as WebDataset writes them. Members are read, never extracted.

Nothing is read whole, and nothing larger than ``max_bytes`` (a file, a tar member, a Parquet
cell) is read at all: its size is known first (a file's size, a member's header, a Parquet
page header), and over the limit it is an entry without bytes that says why. A tar is read a
sample at a time, a Parquet file a row group at a time and a few rows per batch, so what a
small compressed pool that decompresses to gigabytes costs is bounded by `HELD` x ``max_bytes``
(a sample's images, a Parquet page), not by the pool.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal, cast

from yanami import _json
from yanami._parquet_pages import HEADER_BYTES as _HEADER_BYTES
from yanami._parquet_pages import pages_over
from yanami.contract import UserError, open_regular, path_problem, read_regular

PoolFormat = Literal["auto", "folder", "parquet", "webdataset"]
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
"""A pool file (an image file, a tar member, a Parquet cell) larger than this is refused unread."""
HELD = 4
"""What a reader holds at once, in units of the file limit: a WebDataset sample's images, a
Parquet page (a column's run of cells, decompressed). Beyond it, what it would hold is refused unread."""
GROUPS_FILE = "groups.jsonl"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")


@dataclass(frozen=True)
class PoolEntry:
    """One image of a pool, as read."""

    source: str
    """Where it came from: a path relative to the pool, ``FILE#row=N[:k]`` (``FILE#rows=N-M``: a
    refused row group) or ``TAR:MEMBER``."""
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
    r"""``name`` with the bytes a non-UTF-8 file name decoded to as lone surrogates written ``\xNN``;
    any other lone surrogate (a pool's JSON escape ``\ud800`` in a group's name) ``\uNNNN``."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        pass
    try:
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file name decodes to: no byte to write back
        return name.encode("utf-8", "backslashreplace").decode("utf-8")


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


@dataclass(frozen=True)
class _Listed:
    """One line of a pool's ``groups.jsonl``, checked: its group, scenario and images (each a path
    relative to the pool and the file it names inside the pool)."""

    group: str
    scenario: str | None
    images: list[tuple[str, Path]]


def check_groups(pool: Path) -> None:
    """Check ``POOL/groups.jsonl`` whole, where the pool has one: a line that is not JSON, not a
    group, or names a path no file can have (a NUL byte, a lone surrogate) or one outside the pool
    is a `UserError` naming the line, before any image is read or anything written."""
    if (pool / GROUPS_FILE).is_file():
        _groups(pool, pool / GROUPS_FILE)


def _groups(pool: Path, groups_file: Path) -> list[_Listed]:
    rows = []
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
        paths = []
        for rel in images:
            problem = path_problem(rel)
            if problem is not None:
                raise UserError(f"{where}: images: {rel!r} is not a path: it holds {problem}")
            path = _inside(pool, rel)
            if path is None:
                raise UserError(f"{where}: images: {rel!r} is not a path inside {pool}")
            paths.append((rel, path))
        rows.append(_Listed(group, scenario, paths))
    return rows


def _listed(pool: Path, groups_file: Path, max_bytes: int) -> Iterator[PoolEntry]:
    for row in _groups(pool, groups_file):
        for rel, path in row.images:
            if not path.is_file():
                yield PoolEntry(rel, row.group, None, "no such file", row.scenario)
                continue
            data, problem = _read_file(path, max_bytes)
            yield PoolEntry(rel, row.group, data, problem, row.scenario)


# parquet --------------------------------------------------------------------------------------

_IMAGE_COLUMNS = ("image", "images", "img", "jpg", "png")


def _parquet(
    path: Path, pool: Path, image_column: str | None, group_column: str | None, max_bytes: int
) -> Iterator[PoolEntry]:
    try:
        import pyarrow.parquet as pq  # type: ignore[import-untyped]  # no stubs
    except ImportError:
        raise UserError("reading a Parquet pool needs the hf extra: pip install 'yanami[hf]'") from None
    name = _rel(path, pool)
    try:
        fd = open_regular(path)
    except OSError as exc:
        yield PoolEntry(name, name, None, f"cannot be read ({exc.strerror})")
        return
    with open(fd, "rb") as heads:
        try:
            # pages stream through a small buffer: the file's compressed bytes are never all read at once
            f = pq.ParquetFile(path, buffer_size=1 << 20)
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
        reader = _ParquetReader(f, heads, name, image, group, "scenario" in columns, max_bytes)
        try:
            for i in range(f.num_row_groups):
                yield from reader.row_group(i)
        except Exception as exc:  # a truncated or corrupt file fails mid-way: what was read stands
            where = f"{name}#row={reader.row}"
            yield PoolEntry(where, where, None, f"the Parquet file breaks off here ({exc})")


@dataclass
class _ParquetReader:
    """One Parquet file's entries, a row group at a time, a few cells at a time."""

    f: Any
    """The `pyarrow.parquet.ParquetFile`."""
    heads: BinaryIO
    """The same file, for reading page headers."""
    name: str
    image: str
    group: str | None
    scenario: bool
    """Whether there is a ``scenario`` column."""
    max_bytes: int
    row: int = 0
    """The next row of the file."""

    def row_group(self, i: int) -> Iterator[PoolEntry]:
        """The entries of row group ``i``; its images refused unread (an unreadable entry per row)
        where a page of theirs would decompress to more than the limits allow (`_pages_over`)."""
        meta = self.f.metadata.row_group(i)
        side = [c for c in (self.group, "scenario" if self.scenario else None) if c]
        problem = _pages_over(self.heads, meta, [self.image], self.max_bytes)
        if (side_problem := _pages_over(self.heads, meta, side, self.max_bytes)) is not None:
            where = f"{self.name}#rows={self.row}-{self.row + meta.num_rows - 1}"
            yield PoolEntry(where, where, None, problem or side_problem)  # not even the groups can be read
            self.row += meta.num_rows
            return
        if problem is None:
            # as many rows per batch as hold about max_bytes on average: a few cells, not the file
            size = max(1, min(64, self.max_bytes * meta.num_rows // max(1, meta.total_byte_size)))
            columns = [self.image, *side]
        else:
            size, columns = 1024, side
        if not columns:  # refused, and nothing else to read: each row is its own group
            for _ in range(meta.num_rows):
                where = f"{self.name}#row={self.row}"
                yield PoolEntry(where, where, None, problem)
                self.row += 1
            return
        for batch in self.f.iter_batches(batch_size=size, row_groups=[i], columns=columns, use_threads=False):
            cells = batch.column(self.image) if problem is None else None
            groups = batch.column(self.group).to_pylist() if self.group else [None] * batch.num_rows
            scenarios = batch.column("scenario").to_pylist() if self.scenario else [None] * batch.num_rows
            for r in range(batch.num_rows):
                where = f"{self.name}#row={self.row}"
                gname = str(groups[r]) if groups[r] is not None else where
                scenario = scenarios[r] if isinstance(scenarios[r], str) else None
                if cells is None:
                    yield PoolEntry(where, gname, None, problem, scenario)
                elif _is_list(cells.type):
                    value = cells[r]
                    items = list(value.values) if value.is_valid and value.values is not None else []
                    for k, item in enumerate(items):
                        yield PoolEntry(f"{where}:{k}", gname, *_cell_bytes(item, self.max_bytes), scenario)
                else:
                    yield PoolEntry(where, gname, *_cell_bytes(cells[r], self.max_bytes), scenario)
                self.row += 1


def _is_list(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind))


def _cell_bytes(item: Any, max_bytes: int) -> tuple[bytes | None, str | None]:
    """The bytes of one image cell (a pyarrow scalar: bytes or a ``{"bytes": …}`` struct), copied
    out only when they are within ``max_bytes``."""
    import pyarrow as pa

    kind = item.type
    if pa.types.is_struct(kind):
        item = item["bytes"] if item.is_valid and kind.get_field_index("bytes") >= 0 else None
    if item is None or not item.is_valid:
        return None, "the image cell is empty"
    kind = item.type
    t = pa.types
    if not (t.is_binary(kind) or t.is_large_binary(kind) or t.is_binary_view(kind) or t.is_fixed_size_binary(kind)):
        return None, f"the image cell holds {kind}, not bytes"
    buf = item.as_buffer()  # the cell where it lies, not a copy
    if buf.size > max_bytes:
        return None, f"{buf.size} bytes is over the limit of {max_bytes}"
    return bytes(buf.to_pybytes()), None


def _pages_over(heads: BinaryIO, meta: Any, columns: list[str], max_bytes: int) -> str | None:
    """`yanami._parquet_pages.pages_over` with a pool reader's `HELD`."""
    return pages_over(heads, meta, columns, max_bytes, held=HELD)


# webdataset -----------------------------------------------------------------------------------

META_BYTES = 1 << 20
"""A sample's ``.json`` side file larger than this is not read."""
_EXTENDED = (
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
)


class _Bounded(tarfile.TarInfo):
    """A tar header whose extended headers (a long name, pax records) are refused over
    `_HEADER_BYTES` instead of read whole: a compressed tar could make one gigabytes long."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _EXTENDED and self.size > _HEADER_BYTES:
            raise tarfile.ReadError(f"an extended header of {self.size} bytes")
        # typeshed has no stub of the private method this overrides
        return super()._proc_member(tarfile_)  # type: ignore[misc,no-any-return]


@dataclass
class _Sample:
    """The members of one WebDataset sample read so far (its images wait for its ``.json``)."""

    key: str
    images: list[tuple[str, bytes | None, str | None]]
    meta: dict[str, Any] | None = None
    held: int = 0
    """Bytes of its images read so far."""

    def entries(self) -> Iterator[PoolEntry]:
        meta = self.meta or {}
        named = meta.get("group")
        group = named if isinstance(named, str) and named else self.key
        scenario = meta.get("scenario") if isinstance(meta.get("scenario"), str) else None
        for source, data, problem in self.images:
            yield PoolEntry(source, group, data, problem, scenario)


def _webdataset(path: Path, pool: Path, max_bytes: int) -> Iterator[PoolEntry]:
    """The entries of one tar, a sample at a time: a sample's members are consecutive (as WebDataset
    writes them), so what is held is one sample's images, at most `HELD` x ``max_bytes``."""
    name = _rel(path, pool)
    sample: _Sample | None = None
    try:
        with open(open_regular(path), "rb") as raw, tarfile.open(fileobj=raw, mode="r:*", tarinfo=_Bounded) as tar:
            while (member := tar.next()) is not None:
                cast(Any, tar).members.clear()  # headers read are not needed again: a long tar stays small
                base = member.name.rsplit("/", 1)[-1]
                if not member.isfile() or base.startswith("."):
                    continue
                key, dot, ext = base.partition(".")
                key = member.name[: len(member.name) - len(base)] + key
                ext = "." + ext.lower() if dot else ""
                if sample is None or sample.key != key:
                    if sample is not None:
                        yield from sample.entries()
                    sample = _Sample(key, [])
                if ext.endswith(IMAGE_SUFFIXES):
                    sample.images.append(_member(tar, member, f"{name}:{member.name}", sample, max_bytes))
                elif ext == ".json" and member.size <= META_BYTES:
                    sample.meta = _meta(tar, member)
    except (tarfile.TarError, OSError, EOFError, RecursionError) as exc:
        # what was read before the break stands; the break itself is one recorded rejection
        if sample is not None:
            yield from sample.entries()
        yield PoolEntry(name, name, None, f"not a readable tar file ({exc})")
        return
    if sample is not None:
        yield from sample.entries()


def _member(
    tar: tarfile.TarFile, member: tarfile.TarInfo, source: str, sample: _Sample, max_bytes: int
) -> tuple[str, bytes | None, str | None]:
    """An image member's bytes, read only when its size (from its header) is within the limits."""
    if member.size > max_bytes:
        return source, None, f"{member.size} bytes is over the limit of {max_bytes}"
    if sample.held + member.size > HELD * max_bytes:
        return source, None, f"the sample's images together are over {HELD * max_bytes} bytes ({HELD} x the limit)"
    fh = tar.extractfile(member)
    if fh is None:
        return source, None, "unreadable"
    data = fh.read(member.size)
    sample.held += len(data)
    return source, data, None


def _meta(tar: tarfile.TarFile, member: tarfile.TarInfo) -> dict[str, Any] | None:
    """A sample's ``.json`` side file as an object, or None when it is not one."""
    fh = tar.extractfile(member)
    try:
        meta = json.loads(fh.read(META_BYTES)) if fh is not None else None
    except _json.ERRORS:
        return None
    return meta if isinstance(meta, dict) else None
