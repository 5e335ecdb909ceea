"""Parquet page headers, read before a row group is: what a column's pages decompress to.

A Parquet file says in each page header how large the page is once decompressed, so a
reader can refuse a row group whose pages would make it hold more than it may, before
decompressing anything (a small zstd file can hold a page of gigabytes). Used by the Parquet
pools of ``yanami prepare`` and by ``yanami import`` of an export.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, BinaryIO

from yanami.contract import UserError


def pyarrow(missing: str) -> tuple[Any, Any]:
    """The modules ``pyarrow`` and ``pyarrow.parquet`` (untyped: pyarrow has no stubs), or a
    `UserError` saying ``missing`` where pyarrow is not installed."""
    try:
        import pyarrow as pa  # type: ignore[import-untyped]  # no stubs
        import pyarrow.parquet as pq  # type: ignore[import-untyped]  # no stubs
    except ImportError:
        raise UserError(missing) from None
    return pa, pq


def pages_over(heads: BinaryIO, meta: Any, columns: list[str], max_bytes: int, *, held: int) -> str | None:
    """Why the row group ``meta`` may not be read, from the page headers of ``columns`` (before
    any page is read), else None: a page that decompresses to more than ``held`` x ``max_bytes``,
    or to more than ``max_bytes`` per value it holds (so one of its cells is over the limit).

    The reader holds a column's dictionary page and one data page at a time (and about three
    times a page's size while it decodes one): bounding every page bounds what it holds, whatever
    the row group's size or what the column chunk's own summary claims.
    """
    for j in range(meta.num_columns):
        chunk = meta.column(j)
        path = chunk.path_in_schema
        if not any(path == c or path.startswith(c + ".") for c in columns):
            continue
        start = chunk.data_page_offset
        if chunk.has_dictionary_page and 0 < chunk.dictionary_page_offset < start:
            start = chunk.dictionary_page_offset
        end, pos = start + chunk.total_compressed_size, start
        while pos < end:
            heads.seek(pos)
            try:
                unpacked, packed, values = page_sizes(heads)
            except ValueError as exc:
                return f"a page header of column {path} cannot be read ({exc}); not read"
            if unpacked > max(1, values) * (max_bytes + _VALUE_SLACK) + _PAGE_SLACK:
                return (
                    f"a page of column {path} decompresses to {unpacked} bytes for {values} value(s): "
                    f"a cell over the limit of {max_bytes}; not read"
                )
            if unpacked > held * max_bytes:
                return (
                    f"a page of column {path} decompresses to {unpacked} bytes, over the limit of "
                    f"{held * max_bytes} ({held} x {max_bytes}); not read"
                )
            pos = heads.tell() + packed
    return None


_VALUE_SLACK, _PAGE_SLACK = 8, 1024
"""Bytes a page may spend besides its values: per value (its length, its levels), and per page."""
HEADER_BYTES = 1 << 20
"""A Parquet page header or a tar's extended header longer than this is refused (real ones are small)."""


class _Compact:
    """Just enough of Thrift's compact protocol to read a Parquet page header's sizes."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.left = HEADER_BYTES

    def take(self, n: int) -> bytes:
        self.left -= n
        data = self.f.read(n) if self.left >= 0 else b""
        if len(data) != n:
            raise ValueError("it breaks off" if self.left >= 0 else f"over {HEADER_BYTES} bytes")
        return data

    def varint(self) -> int:
        out = shift = 0
        while shift < 70:
            b = self.take(1)[0]
            out |= (b & 0x7F) << shift
            if b < 0x80:
                return out
            shift += 7
        raise ValueError("a varint that does not end")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def fields(self) -> Iterator[tuple[int, int]]:
        """``(field id, type)`` of each field of a struct; the caller reads or skips its value."""
        last = 0
        while head := self.take(1)[0]:
            last = last + (head >> 4) if head >> 4 else self.zigzag()
            yield last, head & 0x0F

    def skip(self, kind: int, depth: int = 0, element: bool = False) -> None:
        if depth > 16:
            raise ValueError("nested too deeply")
        if kind in (1, 2):  # a boolean: in the field's type, or a byte of its own in a collection
            self.take(1 if element else 0)
        elif kind == 3:
            self.take(1)
        elif kind in (4, 5, 6):
            self.varint()
        elif kind == 7:
            self.take(8)
        elif kind == 8:
            self.take(self.varint())
        elif kind in (9, 10):
            head = self.take(1)[0]
            n = head >> 4 if head >> 4 != 15 else self.varint()
            for _ in range(n):
                self.skip(head & 0x0F, depth + 1, element=True)
        elif kind == 11:
            n = self.varint()
            kinds = self.take(1)[0] if n else 0
            for _ in range(n):
                self.skip(kinds >> 4, depth + 1, element=True)
                self.skip(kinds & 0x0F, depth + 1, element=True)
        elif kind == 12:
            for _, inner in self.fields():
                self.skip(inner, depth + 1)
        else:
            raise ValueError(f"an unknown field type {kind}")


def page_sizes(f: BinaryIO) -> tuple[int, int, int]:
    """``(uncompressed, compressed, values)`` of the page whose header starts at ``f``'s position,
    leaving ``f`` at the page's data. A PageHeader holds 2: uncompressed_page_size,
    3: compressed_page_size, and its kind's header (5: data, 7: dictionary, 8: data v2) whose
    field 1 is num_values."""
    reader = _Compact(f)
    sizes: dict[int, int] = {}
    values = 0
    for field_id, kind in reader.fields():
        if field_id in (2, 3) and kind == 5:
            sizes[field_id] = reader.zigzag()
        elif field_id in (5, 7, 8) and kind == 12:
            for inner, inner_kind in reader.fields():
                if inner == 1 and inner_kind == 5:
                    values = reader.zigzag()
                else:
                    reader.skip(inner_kind, 1)
        else:
            reader.skip(kind)
    if sizes.keys() != {2, 3} or min(sizes.values()) < 0:
        raise ValueError("no page sizes")
    return sizes[2], sizes[3], values
