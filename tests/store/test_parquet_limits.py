"""`yanami import` of a Parquet export reads every cell under a cap, a row group at a time."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from yanami.store import _parquet, export_parquet

MB = 1 << 20


def _zero_string(n: int) -> pa.Array:
    """One string cell of ``n`` NUL characters (its buffer is not copied)."""
    offsets = pa.array([0, n], pa.int32()).buffers()[1]
    return pa.Array.from_buffers(pa.string(), 1, [None, offsets, pa.py_buffer(bytearray(n))])


def test_a_zstd_dialogue_cell_bomb_is_refused_in_one_line_unread(built: Path, tmp_path: Path) -> None:
    """A 300 MB dialogue cell in a file of a few KB: one line naming the file, the row and the
    column, nothing written, and the importing process grows by far less than the cell."""
    (f,) = export_parquet(built, tmp_path / "pq")
    table = pq.read_table(f)
    bomb = table.slice(0, 1).set_column(5, "dialogue", pa.chunked_array([_zero_string(300 * MB)]))
    with pq.ParquetWriter(f, table.schema, compression="zstd") as w:
        w.write_table(table)  # rows 0-7, as exported
        w.write_table(bomb)  # row 8
    assert f.stat().st_size < 200_000
    script = (
        "import resource, sys, pyarrow.parquet\nfrom yanami.cli import main\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        f"sys.argv = ['yanami', 'import', {str(tmp_path / 'pq')!r}, '--out', {str(tmp_path / 'back')!r}]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "print(code, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    code, growth = r.stdout.split()[-2:]
    assert code == "2", r.stderr
    assert r.stderr.strip() == (
        f"error: {f}: row 8 onwards cannot be read (a page of column dialogue decompresses to "
        f"{300 * MB + 4} bytes for 1 value(s): a cell over the limit of {64 * MB}; not read)"
    )
    assert int(growth) < 60, growth  # MB; reading the cell would cost 300 and more
    assert not (tmp_path / "back").exists()


@pytest.mark.parametrize("where", ["page", "cell"])
def test_an_image_cell_over_the_cap_is_one_line(
    built: Path, tmp_path: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Refused from its page header, or (a cell the pages let through) once read: either way one
    line naming the file, row and column, and no dataset."""
    (f,) = export_parquet(built, tmp_path / "pq")
    if where == "page":
        monkeypatch.setitem(_parquet._CELL_CAPS, "images", 100)
    else:
        monkeypatch.setattr(_parquet, "MAX_IMAGE_BYTES", 100)
    r = cli("import", tmp_path / "pq", "--out", tmp_path / "back")
    assert r.code == 2
    (line,) = r.err.strip().splitlines()
    if where == "page":
        assert line.startswith(f"error: {f}: row 0 onwards cannot be read (a page of column images.list.element.bytes")
        assert line.endswith("a cell over the limit of 100; not read)")
    else:
        assert line.startswith(f"error: {f}: row 0: images.0: ") and line.endswith(" bytes, over the limit of 100")
    assert not (tmp_path / "back").exists()


def test_a_dialogue_cell_over_the_cap_once_read_is_one_line(
    built: Path, tmp_path: Path, cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    export_parquet(built, tmp_path / "pq")
    monkeypatch.setattr(_parquet, "MAX_DIALOGUE_BYTES", 1000)
    r = cli("import", tmp_path / "pq", "--out", tmp_path / "back")
    assert r.code == 2 and r.err.strip().endswith("row 0: dialogue: over the limit of 1000 bytes")
    assert not (tmp_path / "back").exists()
