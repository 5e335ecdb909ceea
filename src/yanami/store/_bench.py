"""Where a run meets its bench: the bench's identity and finding it again (`open_bench`). The run
format itself is in `yanami.contract`."""

from __future__ import annotations

import hashlib
from pathlib import Path

from yanami.contract import RunManifest, UserError
from yanami.store._manifest import MANIFEST
from yanami.store._reader import Dataset

__all__ = ["bench_sha256", "open_bench"]


def bench_sha256(dataset: Dataset) -> str:
    """A bench's identity: the SHA-256 of its manifest (which holds every shard's and image's hash)."""
    return hashlib.sha256((dataset.root / MANIFEST).read_bytes()).hexdigest()


def open_bench(run: Path, manifest: RunManifest, bench: str | Path | None = None, *, hint: str = "") -> Dataset:
    """The bench a run was made on: ``bench`` if given, else the path the run stores.

    A `UserError` in one line when it is gone, is no dataset, or is not the same bench (its
    manifest's SHA-256 differs); ``hint`` is added to the line (e.g. how to name it).
    """
    path = Path(bench) if bench is not None else manifest.bench_path
    more = f"; {hint}" if hint else ""
    if not path.is_dir():
        raise UserError(f"{run}: its bench {path} is gone (moved or deleted){more}")
    try:
        dataset = Dataset(path)
    except UserError as exc:
        raise UserError(f"{run}: its bench cannot be opened: {exc}{more}") from None
    if bench_sha256(dataset) != manifest.bench_sha256:
        raise UserError(f"{run}: {path} is not the bench this run was made on (its manifest's SHA-256 differs){more}")
    return dataset
