"""`yanami validate`: every kind of damage is reported as path:line: field: message."""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.helpers import edit_line, snapshot
from yanami.contract import sha256_hex
from yanami.store import image_relpath, validate_dataset


def problems_of(ds: Path) -> list[str]:
    return [str(p) for p in validate_dataset(ds)]


def first_image(obj: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in obj["turns"][0]["user"]["parts"] if p["type"] == "image")


def first_image_file(ds: Path) -> Path:
    obj = json.loads((ds / "dialogues" / "00000.jsonl").read_text().splitlines()[0])
    part = first_image(obj)
    return ds / image_relpath(part["sha256"], part["format"])


def test_valid_dataset_has_no_problems(built: Path) -> None:
    assert problems_of(built) == []


def test_valid_dataset_cli(cli: Callable[..., Any], built: Path) -> None:
    r = cli("validate", built)
    assert r.code == 0
    assert "valid (8 dialogues" in r.out


LINE_DAMAGE: list[tuple[str, Callable[[dict[str, Any]], Any], str]] = [
    ("missing field", lambda o: o.pop("meta"), "dialogues/00000.jsonl:2: meta: Field required"),
    ("unknown field", lambda o: o.update(colour="red"), "dialogues/00000.jsonl:2: colour: Extra inputs"),
    ("unknown enum", lambda o: o.update(scenario="painting"), "dialogues/00000.jsonl:2: scenario: Input should be"),
    (
        "unknown capability",
        lambda o: o["capabilities"].append("telepathy"),
        "dialogues/00000.jsonl:2: capabilities.",
    ),
    (
        "turns out of order",
        lambda o: o["turns"].reverse(),
        "dialogues/00000.jsonl:2: turns.0.index: turn indices must run 0, 1, 2, …",
    ),
    (
        "question after a missing turn",
        lambda o: o["questions"][0].update(after_turn=99),
        "dialogues/00000.jsonl:2: questions.0.after_turn: turn 99 does not exist",
    ),
    (
        "question aligned with a missing check",
        lambda o: o["questions"][0].update(aligned_checks=["nope"]),
        "dialogues/00000.jsonl:2: questions.0.aligned_checks.0: check 'nope' does not exist",
    ),
    (
        "path-like hash (parent)",
        lambda o: first_image(o).update(sha256="../x"),
        "dialogues/00000.jsonl:2: turns.0.user.parts.1.image.sha256: not a SHA-256 hex digest",
    ),
    (
        "path-like hash (absolute)",
        lambda o: first_image(o).update(sha256="/etc/passwd"),
        "dialogues/00000.jsonl:2: turns.0.user.parts.1.image.sha256: not a SHA-256 hex digest",
    ),
    (
        "path-like dialogue id",
        lambda o: o.update(id="../../etc"),
        "dialogues/00000.jsonl:2: id: not a valid id",
    ),
    (
        "wrong type",
        lambda o: o["turns"][0].update(index="0"),
        "dialogues/00000.jsonl:2: turns.0.index: Input should be a valid integer",
    ),
    (
        "check on a turn without a generated image",
        lambda o: o["turns"][0]["checks"].append({"id": "x1", "kind": "atomic", "text": "A red cube."}),
        "dialogues/00000.jsonl:2: turns.0.checks: a turn with checks needs an assistant-generated image",
    ),
]


@pytest.mark.parametrize(("change", "expected"), [c[1:] for c in LINE_DAMAGE], ids=[c[0] for c in LINE_DAMAGE])
def test_line_damage_is_reported(dataset: Path, change: Callable[[dict[str, Any]], Any], expected: str) -> None:
    edit_line(dataset, 2, change)
    problems = problems_of(dataset)
    assert any(p.startswith(expected) for p in problems), problems


def test_malformed_json_line(dataset: Path) -> None:
    shard = dataset / "dialogues" / "00000.jsonl"
    lines = shard.read_text().splitlines(keepends=True)
    lines[2] = lines[2][:100] + "\n"
    shard.write_text("".join(lines))
    problems = problems_of(dataset)
    assert any(p.startswith("dialogues/00000.jsonl:3: -: malformed JSON") for p in problems), problems


def test_duplicate_dialogue_id(dataset: Path) -> None:
    shard = dataset / "dialogues" / "00000.jsonl"
    lines = shard.read_text().splitlines(keepends=True)
    shard.write_text("".join([*lines, lines[0]]))
    problems = problems_of(dataset)
    assert any(p.startswith("dialogues/00000.jsonl:9: id: duplicate dialogue id") for p in problems), problems
    # the manifest no longer matches either
    assert any(p.startswith("manifest.json:") and "counts.dialogues" in p for p in problems), problems


def test_missing_image_file(dataset: Path) -> None:
    first_image_file(dataset).unlink()
    problems = problems_of(dataset)
    assert any("turns.0.user.parts.1.sha256: image file images/" in p and "is missing" in p for p in problems)
    assert any("images_sha256: checksum does not match" in p for p in problems), problems


def test_image_bytes_do_not_match_hash(dataset: Path) -> None:
    f = first_image_file(dataset)
    data = bytearray(f.read_bytes())
    data[-20] ^= 0xFF
    f.write_bytes(bytes(data))
    problems = problems_of(dataset)
    assert any(p.startswith("dialogues/00000.jsonl:1: ") and "do not match its hash" in p for p in problems)


def _replace_image(ds: Path, new_bytes: bytes, *, declare: Callable[[dict[str, Any]], None] | None = None) -> None:
    """Point line 1's first image at ``new_bytes`` (stored under their true hash)."""
    sha = sha256_hex(new_bytes)
    dest = ds / image_relpath(sha, "png")
    dest.parent.mkdir(exist_ok=True)
    dest.write_bytes(new_bytes)

    def change(o: dict[str, Any]) -> None:
        first_image(o)["sha256"] = sha
        if declare:
            declare(first_image(o))

    edit_line(ds, 1, change)


def test_truncated_image(dataset: Path) -> None:
    data = first_image_file(dataset).read_bytes()
    _replace_image(dataset, data[: len(data) // 2])
    problems = problems_of(dataset)
    assert any(p.startswith("dialogues/00000.jsonl:1: turns.0.user.parts.1.sha256: image file") for p in problems)
    assert any("cannot decode" in p or "not a readable image" in p for p in problems), problems


def test_undecodable_image(dataset: Path) -> None:
    _replace_image(dataset, b"this is not an image at all")
    problems = problems_of(dataset)
    assert any("not a readable image" in p for p in problems), problems


def test_image_over_pixel_limit(dataset: Path) -> None:
    buf = io.BytesIO()
    Image.new("L", (4000, 3000)).save(buf, format="PNG")
    _replace_image(dataset, buf.getvalue(), declare=lambda p: p.update(width=4000, height=3000))
    problems = [str(p) for p in validate_dataset(dataset, max_pixels=10_000_000)]
    assert any("12000000 pixels is over the limit of 10000000" in p for p in problems), problems
    assert not any("over the limit" in p for p in problems_of(dataset))  # the default limit is higher


def test_decompression_bomb_is_refused_before_decoding(dataset: Path) -> None:
    # A 20000 x 20000 PNG of zeros compresses to a few hundred kilobytes.
    buf = io.BytesIO()
    Image.new("1", (20000, 20000)).save(buf, format="PNG")
    _replace_image(dataset, buf.getvalue(), declare=lambda p: p.update(width=20000, height=20000))
    problems = problems_of(dataset)
    assert any("over the limit" in p for p in problems), problems


def test_declared_size_must_match(dataset: Path) -> None:
    edit_line(dataset, 1, lambda o: first_image(o).update(width=7))
    problems = problems_of(dataset)
    assert any("declared 7x" in p for p in problems), problems


def test_manifest_counts_and_checksums(dataset: Path) -> None:
    m = json.loads((dataset / "manifest.json").read_text())
    m["counts"]["turns"] += 1
    m["shards"]["dialogues/00000.jsonl"] = "0" * 64
    (dataset / "manifest.json").write_text(json.dumps(m, indent=2))
    problems = problems_of(dataset)
    assert any(p.startswith("manifest.json:") and "counts.turns: manifest says" in p for p in problems), problems
    assert any("shards.dialogues/00000.jsonl: checksum does not match" in p for p in problems), problems
    line = next(p for p in problems if "counts.turns" in p).split(":")[1]
    assert (dataset / "manifest.json").read_text().splitlines()[int(line) - 1].strip().startswith('"turns"')


def test_stray_and_orphan_files(dataset: Path) -> None:
    (dataset / "images" / "ab").mkdir(exist_ok=True)
    (dataset / "images" / "ab" / "notes.txt").write_text("hi")
    orphan = b"orphan"
    (dataset / image_relpath(sha256_hex(orphan), "png")).parent.mkdir(exist_ok=True)
    (dataset / image_relpath(sha256_hex(orphan), "png")).write_bytes(orphan)
    problems = problems_of(dataset)
    assert any(p.startswith("images/ab/notes.txt:0: -: unexpected file") for p in problems), problems
    assert any("is not referenced by any dialogue" in p for p in problems), problems


def test_missing_shard_is_reported(dataset: Path) -> None:
    (dataset / "dialogues" / "00000.jsonl").unlink()
    problems = problems_of(dataset)
    assert any("shards.dialogues/00000.jsonl: shard file is missing" in p for p in problems), problems


def test_cli_reports_problems_and_writes_nothing(cli: Callable[..., Any], dataset: Path) -> None:
    edit_line(dataset, 2, lambda o: o.pop("meta"))
    before = snapshot(dataset)
    r = cli("validate", dataset)
    assert r.code == 1
    assert "dialogues/00000.jsonl:2: meta: Field required" in r.out
    assert "Traceback" not in r.out + r.err
    assert snapshot(dataset) == before
    assert sorted(p.name for p in dataset.parent.iterdir()) == ["ds"]


def test_cli_prints_first_50_problems_then_a_count(cli: Callable[..., Any], dataset: Path) -> None:
    shard = dataset / "dialogues" / "00000.jsonl"
    shard.write_text("{not json\n" * 70)
    r = cli("validate", dataset)
    assert r.code == 1
    lines = r.out.strip().splitlines()
    assert len(lines) == 51
    assert lines[-1].startswith("… and ")
    assert all(":" in line for line in lines[:50])


@pytest.mark.parametrize("kind", ["missing", "file", "no-manifest", "other-json"])
def test_not_a_dataset_exits_2(cli: Callable[..., Any], tmp_path: Path, kind: str) -> None:
    target = tmp_path / "x"
    if kind == "file":
        target.write_text("hello")
    elif kind == "no-manifest":
        target.mkdir()
    elif kind == "other-json":
        target.mkdir()
        (target / "manifest.json").write_text('{"name": "something else"}')
    r = cli("validate", target)
    assert r.code == 2
    assert len(r.err.strip().splitlines()) == 1
    assert str(target) in r.err
    assert "Traceback" not in r.err


def test_validation_never_reads_outside_the_dataset(dataset: Path, tmp_path: Path) -> None:
    # An image folder replaced by a link to a folder outside: reported, never followed.
    folder = first_image_file(dataset).parent
    outside = tmp_path / "outside"
    shutil.move(str(folder), outside)
    folder.symlink_to(outside)
    problems = problems_of(dataset)
    assert any(f"images/{folder.name}:0: -: unexpected file" in p for p in problems), problems
    assert any("symbolic link" in p for p in problems), problems
    assert not any("do not match" in p or "declared" in p for p in problems), problems


def test_malformed_manifest_is_a_problem_not_a_crash(cli: Callable[..., Any], dataset: Path) -> None:
    text = (dataset / "manifest.json").read_text()
    (dataset / "manifest.json").write_text(text.replace('"counts": {', '"counts": {,', 1))
    r = cli("validate", dataset)
    assert r.code == 1
    assert r.out.startswith("manifest.json:")
    assert "invalid JSON" in r.out


def test_manifest_with_a_bad_field(dataset: Path) -> None:
    m = json.loads((dataset / "manifest.json").read_text())
    m["split"] = "Not A Split!"
    m["counts"]["dialogues"] = -1
    (dataset / "manifest.json").write_text(json.dumps(m, indent=2))
    problems = problems_of(dataset)
    assert any(p.startswith("manifest.json:") and ": split: " in p for p in problems), problems
    assert any(": counts.dialogues: " in p for p in problems), problems
