"""The demo stores a picture once: runs that hold the bench's pictures, or each other's, share one file."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from yanami.demo import _bench_pictures, disk_usage, share_pictures


def _put(folder: Path, data: bytes, suffix: str = "") -> Path:
    sha = hashlib.sha256(data).hexdigest()
    path = folder / sha[:2] / f"{sha}{suffix}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_runs_share_the_bench_pictures_and_each_others(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    in_bench = _put(bench / "images", b"a picture of the bench" * 500, ".png")
    one, two = tmp_path / "runs" / "one", tmp_path / "runs" / "two"
    copied = _put(one / "outputs", in_bench.read_bytes())
    own = _put(one / "outputs", b"a picture only the runs drew" * 500)
    again = _put(two / "outputs", own.read_bytes())
    _put(two / "outputs", b"left by a killed run").rename(two / "outputs" / "x.tmp")
    before = disk_usage(tmp_path)

    stored = _bench_pictures(bench)
    assert share_pictures(one, stored) == 1 and share_pictures(two, stored) == 1
    assert os.path.samefile(copied, in_bench) and os.path.samefile(again, own)
    assert copied.read_bytes() == in_bench.read_bytes() and again.read_bytes() == own.read_bytes()
    assert disk_usage(tmp_path) < before  # each linked file counted once, as du does
    assert share_pictures(one, stored) == 0  # a second demo finds them linked


def test_a_file_whose_bytes_differ_from_its_name_is_never_shared(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    in_bench = _put(bench / "images", b"the bench's picture", ".png")
    run = tmp_path / "run"
    wrong = run / "outputs" / in_bench.stem[:2] / in_bench.stem
    wrong.parent.mkdir(parents=True)
    wrong.write_bytes(b"other bytes under the same name")
    assert share_pictures(run, _bench_pictures(bench)) == 0
    assert wrong.read_bytes() == b"other bytes under the same name"
