"""`yanami leakage`: exact overlaps fail, near-duplicates are listed for review."""

from __future__ import annotations

import io
import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image, ImageFilter

from yanami.contract import Dialogue, ImageSource, sha256_hex
from yanami.store import DatasetWriter, Generator, find_leakage, image_relpath, phash
from yanami.synthetic import render_placeholder, synthetic_dialogue, write_synthetic


def _write(path: Path, images: list[bytes], seed: int) -> None:
    """A dataset of one dialogue whose first images are ``images``."""
    d, own = synthetic_dialogue(0, seed=seed)
    parts = iter(images)
    with DatasetWriter(path, split="bench", generator=Generator(name="t")) as w:
        mapping = {}
        for sha, data in own.items():
            replacement = next(parts, None)
            data = replacement if replacement is not None else data
            mapping[sha] = w.add_image(data, ImageSource.USER)
        raw = json.loads(d.model_dump_json())
        for t in raw["turns"]:
            for m in (t["user"], t["assistant"]):
                for p in m["parts"]:
                    if p["type"] == "image":
                        new = mapping[p["sha256"]]
                        p.update(sha256=new.sha256, width=new.width, height=new.height)
        w.add_dialogue(Dialogue.model_validate(raw))


def _png(img: Image.Image) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def test_disjoint_datasets(tmp_path: Path, cli: Callable[..., Any]) -> None:
    write_synthetic(tmp_path / "train", 6, seed=1, split="train")
    write_synthetic(tmp_path / "bench", 4, seed=2)
    r = cli("leakage", tmp_path / "train", tmp_path / "bench")
    assert r.code == 0, r.err
    assert r.out.startswith("0 exact, 0 near-duplicate (<= 8) among ")


def test_exact_overlap_fails(tmp_path: Path, cli: Callable[..., Any]) -> None:
    write_synthetic(tmp_path / "train", 6, seed=1, split="train")
    shutil.copytree(tmp_path / "train", tmp_path / "bench")
    r = cli("leakage", tmp_path / "train", tmp_path / "bench", "--json")
    assert r.code == 1
    report = json.loads(r.out)
    assert len(report["exact"]) == report["bench_images"] > 0
    assert report["near"] == []  # exact copies are not listed twice


def test_near_duplicates_are_listed_without_failing(tmp_path: Path, cli: Callable[..., Any]) -> None:
    base = render_placeholder(random.Random(5), 128, 96)
    img = Image.open(io.BytesIO(base)).convert("RGB")
    blurred = _png(img.filter(ImageFilter.GaussianBlur(1)))
    shifted = _png(img.resize((120, 90)))
    unrelated = render_placeholder(random.Random(6), 128, 96)
    _write(tmp_path / "train", [base], seed=98)
    _write(tmp_path / "bench", [blurred, shifted, unrelated], seed=99)
    report = find_leakage(tmp_path / "train", tmp_path / "bench")
    assert report.exact == []
    near = {n.bench: n for n in report.near}
    assert image_relpath(sha256_hex(blurred), "png") in near
    assert image_relpath(sha256_hex(shifted), "png") in near
    assert image_relpath(sha256_hex(unrelated), "png") not in near
    assert all(n.train == image_relpath(sha256_hex(base), "png") and n.distance <= 8 for n in near.values())
    far = bin(phash(base) ^ phash(unrelated)).count("1")
    assert far > 8
    r = cli("leakage", tmp_path / "train", tmp_path / "bench", "--threshold", str(far), "--json")
    assert r.code == 0
    assert image_relpath(sha256_hex(unrelated), "png") in {n["bench"] for n in json.loads(r.out)["near"]}
    r = cli("leakage", tmp_path / "train", tmp_path / "bench")
    assert r.code == 0
    assert r.out.count("near ") == len(report.near)


def test_phash_is_stable_under_small_changes() -> None:
    base = render_placeholder(random.Random(3), 160, 120)
    img = Image.open(io.BytesIO(base)).convert("RGB")
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=75)
    a, b = phash(base), phash(buf.getvalue())
    c = phash(render_placeholder(random.Random(4), 160, 120))
    assert bin(a ^ b).count("1") <= 4
    assert bin(a ^ c).count("1") > 8


def test_workers_give_the_same_report(tmp_path: Path) -> None:
    write_synthetic(tmp_path / "train", 6, seed=1, split="train")
    write_synthetic(tmp_path / "bench", 3, seed=2)
    one = find_leakage(tmp_path / "train", tmp_path / "bench", threshold=20)
    two = find_leakage(tmp_path / "train", tmp_path / "bench", threshold=20, workers=2)
    assert one == two


def test_world_scenes_that_share_only_a_floor_are_not_near(world_bench: Path, tmp_path: Path) -> None:
    # Two world builds from other seeds: a hash of the whole grey image saw mostly the plain
    # floor and called several such pairs near-duplicates; a hash of the foreground does not.
    from yanami.world import build_world

    build_world(tmp_path / "other", per_scenario=2, seed=12)
    report = find_leakage(tmp_path / "other", world_bench)
    assert report.exact == [] and report.bench_images > 40 and report.train_images > 40
    assert report.near == []


def test_a_resized_reencoded_bench_image_is_still_found(
    world_bench: Path, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    bench_files = sorted((world_bench / "images").glob("*/*.png"))
    original = bench_files[len(bench_files) // 2]
    img = Image.open(original).convert("RGB")
    buf = io.BytesIO()
    img.resize((img.width * 3 // 4, img.height * 3 // 4), Image.Resampling.BILINEAR).save(buf, "JPEG", quality=70)
    copy = buf.getvalue()
    _write(tmp_path / "train", [copy], seed=97)
    report = find_leakage(tmp_path / "train", world_bench)
    train_rel = image_relpath(sha256_hex(copy), "jpeg")
    # The copy is found (a bench may hold other near images of the same scene: consecutive
    # turns of a dialogue differ by one edit, so the copy may be near those too).
    found = {(n.bench, n.train): n.distance for n in report.near}
    assert found[(str(original.relative_to(world_bench)), train_rel)] <= 4
    r = cli("leakage", tmp_path / "train", world_bench)
    lines = r.out.splitlines()
    assert r.code == 0
    assert lines[0].startswith(f"0 exact, {len(found)} near-duplicate (<= 8) among ")  # the summary comes first
    assert lines[1].startswith("near  ") and train_rel in lines[1]


def test_summary_first_then_exact_then_near(tmp_path: Path, cli: Callable[..., Any]) -> None:
    write_synthetic(tmp_path / "train", 3, seed=1, split="train")
    shutil.copytree(tmp_path / "train", tmp_path / "bench")
    base = tmp_path / "train" / "images"
    r = cli("leakage", tmp_path / "train", tmp_path / "bench", "--threshold", "64")
    assert r.code == 1
    lines = r.out.splitlines()
    n_exact = len(list(base.glob("*/*")))
    assert lines[0].startswith(f"{n_exact} exact, ")
    assert all(line.startswith("exact ") for line in lines[1 : 1 + n_exact])
    assert all(line.startswith("near  ") for line in lines[1 + n_exact : 1 + n_exact + 50])
    assert lines[1 + n_exact + 50].startswith("… and ")
