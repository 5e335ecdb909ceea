"""Importing other families (issue 13): `yanami import weave` and `yanami import imug` against
the raw rate of reading and hashing the same image files, measured in the same run.

    python benchmarks/bench_import.py                  # 1,000 records, 5,000 images, both families
    python benchmarks/bench_import.py --records 200 --family weave

Each WEAVE record has one input picture and four generated ones (an edit, then three more
edits, each with key points); each IMUG-Bench sample has one input picture per turn and five
turns (text and image tasks alternating). Every picture is a distinct 512 x 384 JPEG. The
baseline reads every image file and takes its SHA-256, one after another, the way the
importer meets them. Baseline and import alternate, twice each, and the faster run of each counts.
Target: the import reaches >= 50 % of the baseline's images per second. The dataset's image files
are hard links to the source's (the default where both share a file system); ``--copy`` measures
an import that copies them.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import tempfile
import time
from pathlib import Path

IMAGES_PER_RECORD = 5


def pictures(folder: Path, n: int) -> list[str]:
    """``n`` distinct photo-like JPEGs in ``folder``; their names."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:384, 0:512].astype(np.float32)
    base = np.stack([128 + 90 * np.sin(xx / 37 + c) * np.cos(yy / 53 - c) for c in (0.0, 1.3, 2.6)], axis=-1)
    base = np.clip(base + rng.normal(0, 8, base.shape), 0, 255).astype(np.uint8)
    folder.mkdir(parents=True)
    names = []
    for i in range(n):
        pixels = base.copy()
        pixels[(i // 512) % 384, i % 512] = (i % 251, (i // 251) % 251, 7)  # distinct bytes per picture
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, format="JPEG", quality=85)
        names.append(f"p{i:05d}.jpg")
        (folder / names[-1]).write_bytes(buf.getvalue())
    return names


def weave_source(root: Path, records: int) -> list[Path]:
    names = pictures(root / "imgs", records * IMAGES_PER_RECORD)
    out = []
    for r in range(records):
        imgs = [f"imgs/{n}" for n in names[r * IMAGES_PER_RECORD : (r + 1) * IMAGES_PER_RECORD]]
        chats = []
        for k in range(2, IMAGES_PER_RECORD + 1):
            chats.append({"role": "user", "type": "text", "content": f"Edit Image #{k - 1}: step {k}."})
            points = {f"GT #{k - 1}": "Compared to <image>, one step on.", "Text": f"Step {k}."}
            chats.append({"role": "assistant", "type": "image", "content": f"Image #{k}", "key_point": points})
        out.append({"domain": "edit", "idx": r, "images": imgs, "chats": chats})
    (root / "test.json").write_text(json.dumps(out))
    return [root / p for p in (f"imgs/{n}" for n in names)]


def imug_source(root: Path, records: int) -> list[Path]:
    data = root / "data"
    names = pictures(data / "images", records * IMAGES_PER_RECORD)
    lines = []
    for r in range(records):
        tasks = []
        for t in range(IMAGES_PER_RECORD):
            image = {"image": names[r * IMAGES_PER_RECORD + t]}
            if t % 2 == 0:
                tasks.append({"turn": t + 1, "modality": "text", "input": [image, {"text": "Which? A. x B. y"}],
                              "output": {"answer": "B"}})  # fmt: skip
            else:
                tasks.append({"turn": t + 1, "modality": "image", "input": [image, {"text": "Draw it."}],
                              "output": {"evaluation_points": ["It is drawn.", "It is kept."]}})  # fmt: skip
        lines.append({"domain": "Botany", "subdomain": "growth", "sample_id": r, "tasks": tasks})
    (data / "benchmark.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return [data / "images" / n for n in names]


def read_and_hash(files: list[Path]) -> float:
    start = time.perf_counter()
    for f in files:
        hashlib.sha256(f.read_bytes()).hexdigest()
    return time.perf_counter() - start


def bench(family: str, tmp: Path, records: int, copy: bool = False) -> None:
    from yanami.contract import family_of

    src = tmp / family
    files = (weave_source if family == "weave" else imug_source)(src, records)
    mb = sum(f.stat().st_size for f in files) / 1e6
    raws, takes = [], []
    for k in range(2):  # baseline and import alternate, twice; the faster of each counts
        raws.append(read_and_hash(files))
        start = time.perf_counter()
        m = family_of(family).hook("importer")(src, tmp / f"{family}-ds{k}", link=not copy)
        takes.append(time.perf_counter() - start)
    raw, took = min(raws), min(takes)
    n = len(files)
    name = f"{family} --copy" if copy else family
    print(f"{name}: {m.counts.dialogues} records, {n} images ({mb:.0f} MB): read and hash {n / raw:,.0f} images/s "
          f"({raw:.2f} s); import {n / took:,.0f} images/s ({took:.2f} s) = {100 * raw / took:.0f} % of it   "
          "target >= 50 %")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--family", choices=["weave", "imug"])
    ap.add_argument("--copy", action="store_true", help="copy the image files instead of hard-linking them")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for family in ("weave", "imug"):
            if args.family in (None, family):
                bench(family, Path(tmp), args.records, args.copy)


if __name__ == "__main__":
    main()
