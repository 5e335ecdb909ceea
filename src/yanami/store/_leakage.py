"""Train/bench leakage: images shared exactly (SHA-256) or nearly (perceptual hash)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from PIL import Image

from yanami._workers import quiet_worker, starting_workers
from yanami.store._images import DEFAULT_MAX_PIXELS, ImageProblem, open_image_bytes, scan_image_files
from yanami.store._reader import open_dataset_dir

DEFAULT_THRESHOLD = 8
"""Hamming distance (of 64 bits) at or under which two images count as near-duplicates."""


@dataclass(frozen=True)
class NearDuplicate:
    """A bench image and a train image whose perceptual hashes are close."""

    bench: str
    """Path of the bench image, relative to the bench directory."""
    train: str
    """Path of the train image, relative to the train directory."""
    distance: int


@dataclass(frozen=True)
class LeakageReport:
    """What a train set and a bench share."""

    exact: list[str]
    """Relative paths (``images/ab/….png``) of images present in both, byte for byte."""
    near: list[NearDuplicate]
    """Pairs within the threshold that are not exact copies, closest first."""
    bench_images: int
    train_images: int
    unreadable: list[str]
    """Images that could not be decoded for perceptual hashing (see ``yanami validate``)."""


_GRID = 32
"""Side of the colour thumbnail the hash is computed on."""


@cache
def _projections() -> np.ndarray:
    """64 fixed random ±1 directions in thumbnail space (from SHAKE-256, so the same everywhere)."""
    n = _GRID * _GRID * 3
    raw = hashlib.shake_256(b"yanami leakage hash, projections 1").digest(64 * n // 8)
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8)).reshape(64, n)
    return bits.astype(np.float64) * 2 - 1


def phash(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> int:
    """64-bit perceptual hash of what stands out from an image's background.

    A 32x32 colour thumbnail loses its background (each row's median colour: a plain or
    graded floor or wall), and the sign of the rest's projection on 64 fixed random
    directions gives the bits (SimHash). Two images differ in about 64·θ/π bits, θ being
    the angle between their foregrounds: a resized or re-encoded copy keeps a few bits
    apart, while scenes that merely share a floor no longer look alike, as they did to a
    hash of the whole grey image.
    """
    img = open_image_bytes(data, max_pixels)
    img.draft("RGB", (2 * _GRID, 2 * _GRID))  # JPEG: decode at reduced size
    rgb = np.asarray(img.convert("RGB").resize((_GRID, _GRID), Image.Resampling.BOX), dtype=np.float64)
    fg = rgb - np.median(rgb, axis=1, keepdims=True)
    v = fg.ravel() - fg.mean()
    bits = _projections() @ v > 0
    return int(np.packbits(bits).view(">u8")[0])


def _phash_file(path: str) -> int | None:
    try:
        return phash(Path(path).read_bytes())
    except (OSError, ImageProblem):
        return None


def _phashes(root: Path, rels: list[str], workers: int, on_image: Callable[[], None] | None) -> Iterator[int | None]:
    paths = [str(root / r) for r in rels]
    results: Iterable[int | None]
    if workers > 1:
        pool = ProcessPoolExecutor(workers, initializer=quiet_worker)
        with starting_workers():  # map submits every task at once: the workers start here
            results = pool.map(_phash_file, paths, chunksize=64)
    else:
        pool = None
        results = map(_phash_file, paths)
    try:
        for h in results:
            if on_image is not None:
                on_image()
            yield h
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)


def find_leakage(
    train: str | Path,
    bench: str | Path,
    *,
    threshold: int = DEFAULT_THRESHOLD,
    workers: int = 1,
    on_image: Callable[[], None] | None = None,
) -> LeakageReport:
    """Compare the images of a train set and a bench, exactly and perceptually."""
    train_root, _, _ = open_dataset_dir(train)
    bench_root, _, _ = open_dataset_dir(bench)
    train_files, bench_files = scan_image_files(train_root)[0], scan_image_files(bench_root)[0]
    train_hashes = set(train_files.values())
    exact = sorted(rel for rel, sha in bench_files.items() if sha in train_hashes)

    unreadable: list[str] = []
    bench_rels = list(bench_files)
    bench_ph: list[int] = []
    kept_bench: list[str] = []
    for rel, h in zip(bench_rels, _phashes(bench_root, bench_rels, workers, on_image), strict=True):
        if h is None:
            unreadable.append(f"{bench}/{rel}")
        else:
            bench_ph.append(h)
            kept_bench.append(rel)
    bench_arr = np.array(bench_ph, dtype=np.uint64)
    near: list[NearDuplicate] = []
    train_rels = list(train_files)
    chunk_rels: list[str] = []
    chunk: list[int] = []

    def compare() -> None:
        if not chunk or not len(bench_arr):
            return
        dist = np.bitwise_count(np.array(chunk, dtype=np.uint64)[:, None] ^ bench_arr[None, :])
        for ti, bi in zip(*np.nonzero(dist <= threshold), strict=True):
            if train_files[chunk_rels[ti]] != bench_files[kept_bench[bi]]:
                near.append(NearDuplicate(kept_bench[bi], chunk_rels[ti], int(dist[ti, bi])))

    for rel, h in zip(train_rels, _phashes(train_root, train_rels, workers, on_image), strict=True):
        if h is None:
            unreadable.append(f"{train}/{rel}")
            continue
        chunk_rels.append(rel)
        chunk.append(h)
        if len(chunk) >= 4096:
            compare()
            chunk_rels, chunk = [], []
    compare()
    near.sort(key=lambda n: (n.distance, n.bench, n.train))
    return LeakageReport(exact, near, len(bench_files), len(train_files), unreadable)
