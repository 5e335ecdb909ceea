"""Pool readers under caps: a tar member or a Parquet cell over the limit is refused unread, and a
small compressed pool that decompresses to gigabytes is read in bounded memory."""

from __future__ import annotations

import gzip
import io
import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.construct.test_prepare import picture
from yanami.construct import read_pool
from yanami.construct._pool import DEFAULT_MAX_BYTES, HELD

MB = 1 << 20


class Zeros(io.RawIOBase):
    """``n`` zero bytes as a stream, so a test writes a huge member without holding it."""

    def __init__(self, n: int) -> None:
        self.left = n

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray | memoryview) -> int:  # type: ignore[override]
        k = min(len(b), self.left)
        b[:k] = bytes(k)
        self.left -= k
        return k


def add(tar: tarfile.TarFile, name: str, data: bytes | int) -> None:
    """A member ``name`` holding ``data``, or that many zero bytes (streamed)."""
    info = tarfile.TarInfo(name)
    info.size = data if isinstance(data, int) else len(data)
    tar.addfile(info, io.BufferedReader(Zeros(data), MB) if isinstance(data, int) else io.BytesIO(data))


def gzip_tar(path: Path, members: list[tuple[str, bytes | int]]) -> None:
    """A gzip tar of ``members`` (bytes, or that many MiB of zeros), written as a chain of gzip
    members: a MiB of zeros is compressed once and repeated, so the test writes it at once."""
    zeros = gzip.compress(bytes(MB), 9)
    with path.open("wb") as out:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = data if isinstance(data, int) else len(data)
            out.write(gzip.compress(info.tobuf()))
            if isinstance(data, int):
                out.write(zeros * (data // MB))
            else:
                out.write(gzip.compress(data + bytes(-len(data) % tarfile.BLOCKSIZE)))
        out.write(gzip.compress(bytes(2 * tarfile.BLOCKSIZE)))  # the end of the archive


def peak_growth_mb(code: str) -> tuple[int, str]:
    """Run ``code`` (which may print) in a fresh interpreter; its peak RSS growth (MiB) after the
    imports, and what it printed."""
    script = (
        "import resource, pyarrow.parquet\nfrom yanami.construct import read_pool\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        f"{code}\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    *printed, growth = r.stdout.splitlines()
    return int(growth), "\n".join(printed)


def test_a_tar_member_over_the_limit_is_unreadable_and_never_extracted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good, limit = picture(1, (8, 8)), 4000
    with tarfile.open(tmp_path / "pool.tar", "w") as tar:
        add(tar, "a.png", good)
        add(tar, "a.json", json.dumps({"group": "cats", "scenario": "fusion"}).encode())
        add(tar, "big.png", limit + 1)
        for k in range(HELD + 1):  # one sample of small images: the last one is over HELD x the limit
            add(tar, f"many.{k}.png", limit - 1)
        add(tar, "deep.png", good)
        add(tar, "deep.json", b"[" * 100_000)  # nested too deeply: no metadata, not a crash
    extracted: list[str] = []
    real = tarfile.TarFile.extractfile

    def spy(self: tarfile.TarFile, member: tarfile.TarInfo | str) -> object:
        extracted.append(member.name if isinstance(member, tarfile.TarInfo) else member)
        return real(self, member)

    monkeypatch.setattr(tarfile.TarFile, "extractfile", spy)
    entries = {e.source: e for e in read_pool(tmp_path / "pool.tar", max_bytes=limit)}
    assert (entries["pool.tar:a.png"].data, entries["pool.tar:a.png"].group) == (good, "cats")
    assert entries["pool.tar:a.png"].scenario == "fusion"
    big = entries["pool.tar:big.png"]
    assert big.data is None and big.problem == f"{limit + 1} bytes is over the limit of {limit}"
    assert "big.png" not in extracted
    many = [entries[f"pool.tar:many.{k}.png"] for k in range(HELD + 1)]
    assert all(e.data == bytes(limit - 1) and e.group == "many" for e in many[:HELD])
    assert many[HELD].data is None and "the sample's images together are over" in (many[HELD].problem or "")
    assert f"many.{HELD}.png" not in extracted
    assert (entries["pool.tar:deep.png"].data, entries["pool.tar:deep.png"].group) == (good, "deep")


def test_an_extended_tar_header_over_the_limit_is_a_recorded_break(tmp_path: Path) -> None:
    good = picture(1)
    with tarfile.open(tmp_path / "pool.tar", "w", format=tarfile.PAX_FORMAT) as tar:
        add(tar, "a.png", good)
        info = tarfile.TarInfo("b.png")
        info.pax_headers = {"comment": "x" * (2 * MB)}  # tarfile would read the whole header at once
        info.size = len(good)
        tar.addfile(info, io.BytesIO(good))
    entries = list(read_pool(tmp_path / "pool.tar"))
    assert entries[0].data == good
    assert entries[-1].data is None and "not a readable tar file (an extended header of" in (entries[-1].problem or "")


def test_a_gzip_tar_bomb_is_read_one_sample_at_a_time(tmp_path: Path) -> None:
    """Under 1 MB of gzip that decompresses to 560 MB: two members over the limit (skipped
    unread) and six just under it, each its own sample (each read, then let go)."""
    path = tmp_path / "bomb.tar"
    huge = [(f"huge{k}.png", 100 * MB) for k in range(2)]
    gzip_tar(path, [*huge, *((f"s{k}.png", 60 * MB) for k in range(6)), ("z.png", picture(1))])
    assert path.stat().st_size < MB
    code = (
        f"for e in read_pool(pathlib.Path({str(path)!r})):\n"
        "    print(e.source, len(e.data) if e.data is not None else e.problem)"
    )
    growth, printed = peak_growth_mb("import pathlib\n" + code)
    lines = printed.splitlines()
    over = f"bytes is over the limit of {DEFAULT_MAX_BYTES}"
    assert lines[:2] == [f"bomb.tar:huge{k}.png {100 * MB} {over}" for k in (0, 1)]
    assert lines[2:] == [*(f"bomb.tar:s{k}.png {60 * MB}" for k in range(6)), f"bomb.tar:z.png {len(picture(1))}"]
    assert growth < 300, f"reading the tar grew the process by {growth} MiB"  # all of it held: 360 MiB and more


def zero_cells(*sizes: int) -> pa.ChunkedArray:
    """A binary column of zero-filled cells, one chunk each (the buffers are not copied)."""
    chunks = []
    for n in sizes:
        offsets = pa.array([0, n], pa.int32()).buffers()[1]
        chunks.append(pa.Array.from_buffers(pa.binary(), 1, [None, offsets, pa.py_buffer(bytearray(n))]))
    return pa.chunked_array(chunks, pa.binary())


def test_a_zstd_parquet_cell_bomb_is_refused_from_its_page_header(tmp_path: Path) -> None:
    good = picture(1)
    path = tmp_path / "bomb.parquet"
    schema = pa.schema([("group", pa.string()), ("image", pa.binary())])
    with pq.ParquetWriter(path, schema, compression="zstd", use_dictionary=False, write_statistics=False) as w:
        w.write_table(pa.table({"group": ["ok"], "image": [good]}))
        w.write_table(pa.table({"group": ["boom"], "image": zero_cells(300 * MB)}))
    assert path.stat().st_size < 64_000
    code = (
        f"for e in read_pool(pathlib.Path({str(path)!r})):\n"
        "    print(e.source, e.group, len(e.data) if e.data is not None else e.problem)"
    )
    growth, printed = peak_growth_mb("import pathlib\n" + code)
    ok, boom = printed.splitlines()
    assert ok == f"bomb.parquet#row=0 ok {len(good)}"
    m = re.fullmatch(r"bomb.parquet#row=1 boom a page of column image decompresses to (\d+) bytes for 1 value\(s\): "
                     rf"a cell over the limit of {DEFAULT_MAX_BYTES}; not read", boom)  # fmt: skip
    assert m is not None and 300 * MB < int(m[1]) < 300 * MB + 64, boom  # the cell, its length, its level
    assert growth < 100, f"reading the file grew the process by {growth} MiB"  # read: 1.2 GiB and more


@pytest.mark.parametrize(
    ("cell", "count", "read"),
    [
        (300, 10, True),  # a page of 3000 bytes: ten cells within the limit, under HELD x the limit
        (2500, 1, False),  # one cell over the limit
        (500, 10, False),  # cells within the limit, but a page over HELD x the limit
    ],
)
def test_a_parquet_page_is_read_only_within_the_limits(tmp_path: Path, cell: int, count: int, read: bool) -> None:
    limit = 1000
    path = tmp_path / "pool.parquet"
    table = pa.table({"group": ["g"] * count, "image": [bytes([k]) * cell for k in range(count)]})
    pq.write_table(table, path, use_dictionary=False)
    entries = list(read_pool(path, max_bytes=limit))
    assert [e.group for e in entries] == ["g"] * count  # a refused row still counts in its group
    if read:
        assert [e.data for e in entries] == table.column("image").to_pylist()
    else:
        assert all(e.data is None and "; not read" in (e.problem or "") for e in entries)
