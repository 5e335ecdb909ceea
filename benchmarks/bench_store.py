"""Storage-layer throughput and memory, with baselines measured in the same run.

    python benchmarks/bench_store.py            # all three measurements
    python benchmarks/bench_store.py --only parse --dialogues 40000

Targets (issue 2):
  parse   validating dialogues (~7 turns, ~5 images, ~20 checks), images excluded:
          >= 20,000 dialogues/s on one core
  hash    verifying image hashes (read + SHA-256): >= 50 % of raw in-memory SHA-256
  memory  reading a 100,000-dialogue dataset: peak memory independent of its size
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from yanami.contract import Dialogue, ImageSource, sha256_hex
from yanami.store import DatasetWriter, Generator, image_relpath, validate_dataset
from yanami.store._images import read_image_file
from yanami.synthetic import render_placeholder, synthetic_dialogue


def one_image_dataset(path: Path, n: int, distinct: int = 2000) -> float:
    """A dataset of ``n`` realistic dialogues that all reference one real image.

    Returns the mean line size in bytes. Dialogues repeat every ``distinct`` with new ids,
    which keeps building fast; the validator does the same work for each line.
    """
    image = render_placeholder(random.Random(0), 64, 64)
    sha = sha256_hex(image)
    slots = _AllSlots((sha, 64, 64))
    base = [synthetic_dialogue(i, seed=1, image_for=slots)[0] for i in range(min(n, distinct))]
    size = 0
    with DatasetWriter(path, split="bench", generator=Generator(name="bench")) as w:
        w.add_image(image, ImageSource.USER)
        for i in range(n):
            d = base[i % len(base)].model_copy(update={"id": f"d{i:07d}"})
            w.add_dialogue(d)
            size += len(d.model_dump_json())
    return size / n


class _AllSlots(dict[str, tuple[str, int, int]]):
    def __init__(self, value: tuple[str, int, int]) -> None:
        super().__init__()
        self.value = value

    def get(self, key: str, default: object = None) -> tuple[str, int, int]:  # type: ignore[override]
        return self.value


def bench_parse(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ds = Path(tmp) / "ds"
        mean = one_image_dataset(ds, n)
        lines = (ds / "dialogues" / "00000.jsonl").read_bytes().splitlines()[:5000]
        d = Dialogue.model_validate_json(lines[0])
        print(
            f"parse: {n} dialogues, mean {mean / 1024:.1f} KiB/line, e.g. {len(d.turns)} turns, "
            f"{len(d.images())} images, {len(d.checks())} checks, {len(d.questions)} questions"
        )
        t = time.perf_counter()
        problems = validate_dataset(ds)
        dt = time.perf_counter() - t
        assert problems == [], problems[:3]
        rate = n / dt
        t = time.perf_counter()
        for line in lines:
            Dialogue.model_validate_json(line, strict=True)
        base = len(lines) / (time.perf_counter() - t)
        t = time.perf_counter()
        for line in lines:
            json.loads(line)
        plain = len(lines) / (time.perf_counter() - t)
        print(f"  yanami validate (whole dataset, one process): {rate:,.0f} dialogues/s   target >= 20,000")
        print(f"  baseline pydantic model_validate_json alone: {base:,.0f} dialogues/s  (x{rate / base:.2f})")
        print(f"  baseline json.loads alone:                   {plain:,.0f} dialogues/s  (x{rate / plain:.2f})")


def bench_hash(n_images: int, side: int) -> None:
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        blobs = []
        for _ in range(n_images):
            # Noise compresses badly, so files have realistic PNG sizes for their resolution.
            data = os.urandom(side * side * 3 // 4) + render_placeholder(rng, side, side)
            blobs.append(data)
            sha = sha256_hex(data)
            p = root / image_relpath(sha, "png")
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        total = sum(map(len, blobs))
        t = time.perf_counter()
        for data in blobs:
            hashlib.sha256(data).hexdigest()
        raw = total / (time.perf_counter() - t)
        shas = [sha256_hex(b) for b in blobs]
        t = time.perf_counter()
        for sha in shas:
            assert sha256_hex(read_image_file(root, sha, "png")) == sha
        verify = total / (time.perf_counter() - t)
        print(f"hash: {n_images} files, {total / 2**20:.0f} MiB (page cache warm)")
        print(f"  raw SHA-256 of the bytes in memory:    {raw / 1e9:.2f} GB/s")
        print(
            f"  yanami verify (read file + SHA-256):   {verify / 1e9:.2f} GB/s  = {100 * verify / raw:.0f} % of raw"
            "   target >= 50 %"
        )


# Peak RSS from /proc (VmHWM): ru_maxrss would carry the parent's peak across exec.
_READ = """
import re, sys
from yanami.store import Dataset
n = 0
turns = 0
for d in Dataset(sys.argv[1]):
    n += 1
    turns += len(d.turns)
status = open("/proc/self/status").read()
print(n, turns, re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1))
"""

_VALIDATE = """
import re, sys
from yanami.store import validate_dataset
assert validate_dataset(sys.argv[1]) == []
status = open("/proc/self/status").read()
print(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1))
"""


def bench_memory(big: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        sizes = [big // 10, big]
        for n in sizes:
            ds = Path(tmp) / f"ds{n}"
            one_image_dataset(ds, n)
            t = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", _READ, str(ds)], capture_output=True, text=True, check=True)
            dt = time.perf_counter() - t
            count, _, rss = out.stdout.split()
            mib = sum(f.stat().st_size for f in (ds / "dialogues").iterdir()) / 2**20
            print(
                f"memory: read {int(count):,} dialogues ({mib:,.0f} MiB of JSONL) in {dt:.1f} s: "
                f"peak RSS {int(rss) / 1024:,.0f} MiB"
            )
            t = time.perf_counter()
            out = subprocess.run([sys.executable, "-c", _VALIDATE, str(ds)], capture_output=True, text=True, check=True)
            dt = time.perf_counter() - t
            print(
                f"        validate {n:,} dialogues in {dt:.1f} s ({n / dt:,.0f}/s with start-up): "
                f"peak RSS {int(out.stdout) / 1024:,.0f} MiB (it keeps each dialogue id to find duplicates)"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["parse", "hash", "memory"])
    ap.add_argument("--dialogues", type=int, default=20_000)
    ap.add_argument("--images", type=int, default=400)
    ap.add_argument("--side", type=int, default=512)
    ap.add_argument("--big", type=int, default=100_000)
    args = ap.parse_args()
    if args.only in (None, "parse"):
        bench_parse(args.dialogues)
    if args.only in (None, "hash"):
        bench_hash(args.images, args.side)
    if args.only in (None, "memory"):
        bench_memory(args.big)


if __name__ == "__main__":
    main()
