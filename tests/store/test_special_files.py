"""A dataset's files are read only where they are regular files: a FIFO in place of an image or a
shard is a problem line (validate) or one error line (the other commands), never a hang."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from yanami.store import Dataset, sha256_file


def _within(seconds: float, fn: Callable[[], Any]) -> Any:
    """``fn()``, failing the test (instead of hanging it) when it has not returned in time."""
    out: list[Any] = []
    failed: list[BaseException] = []

    def call() -> None:
        try:
            out.append(fn())
        except BaseException as exc:
            failed.append(exc)

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "blocked on a FIFO"
    if failed:
        raise failed[0]
    return out[0]


def test_an_image_that_is_a_fifo_is_a_problem_not_a_hang(dataset: Path, cli: Callable[..., Any]) -> None:
    image = sorted((dataset / "images").rglob("*.png"))[0]
    image.unlink()
    os.mkfifo(image)
    r = _within(20, lambda: cli("validate", dataset))
    assert r.code == 1 and "not a regular file" in r.out + r.err, r.out + r.err
    with pytest.raises(OSError, match="not a regular file"):
        _within(5, lambda: sha256_file(image))


def test_a_shard_that_is_a_fifo_is_one_line_not_a_hang(dataset: Path, cli: Callable[..., Any]) -> None:
    shard = sorted((dataset / "dialogues").glob("*.jsonl"))[0]
    shard.unlink()
    os.mkfifo(shard)
    r = _within(20, lambda: cli("stats", dataset))
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "shard" in r.err
    with pytest.raises(Exception, match=r"not a file|not a regular file"):
        _within(5, lambda: list(Dataset(dataset)))
