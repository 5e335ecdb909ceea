"""A picture changed and re-hashed consistently passes `yanami validate`; `--deep` and `yanami audit`
read it against its turn's hidden state and name it."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageOps

from yanami.contract import sha256_hex
from yanami.store import Dataset, image_relpath, images_digest, scan_image_files
from yanami.world import Parser, build_world, parse_image, render_png, reparse_bench, view_of
from yanami.world._ops import View
from yanami.world._place import valid
from yanami.world._reparse import difference
from yanami.world._scene import Scene


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A world bench of one dialogue per scenario (read-only: copy it before changing anything)."""
    out = tmp_path_factory.mktemp("reparse") / "bench"
    build_world(out, per_scenario=1, seed=5)
    return out


def _target_picture(bench: Path) -> tuple[str, str]:
    """The first target turn's picture (a turn with checks): its hash, and its dialogue's id."""
    for d in Dataset(bench):
        for t in d.turns:
            if t.checks and t.assistant.images():
                return t.assistant.images()[0].sha256, d.id
    raise AssertionError("no target turn")


def reseal(bench: Path) -> None:
    """Bring the manifest's checksums (each shard's, the image set's) in line with the files."""
    manifest = json.loads((bench / "manifest.json").read_text())
    for rel in manifest["shards"]:
        manifest["shards"][rel] = hashlib.sha256((bench / rel).read_bytes()).hexdigest()
    manifest["images_sha256"] = images_digest(list(scan_image_files(bench)[0].values()))
    (bench / "manifest.json").write_text(json.dumps(manifest, indent=2))


def rehash(bench: Path, old: str, new_bytes: bytes) -> str:
    """Replace the picture ``old`` by ``new_bytes`` everywhere, as a careful forger would: the file
    renamed to its new hash, every reference and the checksums updated, so the dataset is
    consistent again."""
    new = sha256_hex(new_bytes)
    (bench / image_relpath(old, "png")).unlink()
    dest = bench / image_relpath(new, "png")
    dest.parent.mkdir(exist_ok=True)
    dest.write_bytes(new_bytes)
    for shard in (bench / "dialogues").glob("*.jsonl"):
        shard.write_text(shard.read_text().replace(old, new))
    reseal(bench)
    return new


def mirrored(bench: Path, sha: str) -> bytes:
    with Image.open(bench / image_relpath(sha, "png")) as img:
        buf = io.BytesIO()
        ImageOps.mirror(img.convert("RGB")).save(buf, format="PNG")
    return buf.getvalue()


def test_an_untampered_bench_passes_the_deep_check_and_the_audit(tiny: Path, cli: Callable[..., Any]) -> None:
    r = cli("validate", tiny, "--deep")
    assert r.code == 0, r.out + r.err
    assert "--deep: " in r.out and "pictures re-parsed, each shows its hidden state" in r.out
    r = cli("audit", tiny, "--draws", "2")
    assert r.code == 0, r.out + r.err
    assert "pictures parsed against their turn's hidden state:" in r.out and "each shows it" in r.out


def test_a_mirrored_picture_rehashed_consistently_is_named_by_validate_deep_and_audit(
    tiny: Path, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(tiny, bench)
    old, dialogue = _target_picture(bench)
    new = rehash(bench, old, mirrored(bench, old))
    image = image_relpath(new, "png")

    plain = cli("validate", bench)
    assert plain.code == 0, plain.out  # the store's own checks cannot tell

    for workers in ("1", "2"):  # the worker count never changes a result
        r = cli("validate", bench, "--deep", "--workers", workers)
        assert r.code == 1, r.out + r.err
        lines = [line for line in r.out.splitlines() if image in line]
        assert lines and all("parsed scene differs from the hidden state" in line for line in lines), r.out
        assert lines[0].startswith("dialogues/00000.jsonl:") and f"({dialogue} turn " in lines[0]
        assert ": turns." in lines[0] and ".assistant.parts." in lines[0]
        assert " moved " in lines[0] or " missing" in lines[0], lines[0]
        assert all(image in line for line in r.out.splitlines()), r.out  # no other picture is named

    r = cli("audit", bench, "--draws", "2")
    assert r.code == 1
    assert "pictures parsed against their turn's hidden state:" in r.out and "1 differs from it" in r.out
    assert any(line.startswith("picture differs: ") and image in line for line in r.out.splitlines()), r.out
    r = cli("audit", bench, "--draws", "2", "--json")
    figures = json.loads(r.out[: r.out.rindex("}") + 1])
    assert figures["pictures_differing"] == 1 and figures["differing_images"] == [image]


def test_the_difference_says_which_object_is_wrong(tiny: Path) -> None:
    views = [view_of(t) for d in Dataset(tiny) for t in d.turns if t.assistant.images()]

    def moved_of(v: View) -> Scene:
        first, *rest = v.scene.objects
        return v.scene.model_copy(update={"objects": (first.model_copy(update={"x": first.x + 1.5}), *rest)})

    # a picture whose first object, moved 1.5 to the side, still stands free (hidden by no other)
    truth = next(v for v in views if v is not None and len(v.scene.objects) >= 2 and valid(moved_of(v)))
    assert difference(parse_image(render_png(truth.scene, truth.azimuth, truth.style), truth.azimuth), truth) == ""
    first, *rest = truth.scene.objects
    name = f"{first.size} {first.colour} {first.material} {first.shape}#{first.id}"
    moved = moved_of(truth)
    drawn = parse_image(render_png(moved, truth.azimuth, truth.style), truth.azimuth)
    assert f"{name} moved 1.5" in difference(drawn, truth)
    fewer = truth.scene.model_copy(update={"objects": tuple(rest)})
    drawn = parse_image(render_png(fewer, truth.azimuth, truth.style), truth.azimuth)
    assert f"{name} missing" in difference(drawn, truth)


def test_a_dataset_without_world_pictures_has_nothing_to_reparse(built: Path, cli: Callable[..., Any]) -> None:
    r = cli("validate", built, "--deep")
    assert r.code == 0, r.out + r.err
    assert "--deep: nothing to re-parse" in r.out
    with Parser() as parser:
        found = reparse_bench(Dataset(built), parser)
    assert (found.world, found.pictures, found.disagreements) == (0, 0, []) and found.others == 8


def test_deep_is_not_run_on_a_dataset_with_problems(tiny: Path, tmp_path: Path, cli: Callable[..., Any]) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(tiny, bench)
    old, _ = _target_picture(bench)
    (bench / image_relpath(old, "png")).unlink()
    r = cli("validate", bench, "--deep")
    assert r.code == 1 and "is missing" in r.out and "Traceback" not in r.err
    assert "--deep: the pictures were not re-parsed" in r.err


@pytest.mark.parametrize(
    ("state", "expected"),
    [({"scene": [{"shape": "blob"}]}, "not a world scene"), (None, "shows a picture but holds no scene")],
    ids=["not a scene", "no state"],
)
def test_a_hidden_state_that_is_no_scene_is_one_problem_line(
    tiny: Path, tmp_path: Path, cli: Callable[..., Any], state: dict[str, Any] | None, expected: str
) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(tiny, bench)
    shard = bench / "dialogues" / "00000.jsonl"
    lines = shard.read_text().splitlines(keepends=True)
    d = json.loads(lines[0])
    turn = next(t for t in d["turns"] if t["assistant"]["parts"][-1]["type"] == "image")
    turn["hidden"]["state"] = None if state is None else {**turn["hidden"]["state"], **state}
    lines[0] = json.dumps(d) + "\n"
    shard.write_text("".join(lines))
    reseal(bench)
    assert cli("validate", bench).code == 0  # the hidden state is free JSON to the store
    r = cli("validate", bench, "--deep")
    assert r.code == 1 and "Traceback" not in r.err
    assert f"dialogues/00000.jsonl:1: turns.{turn['index']}.hidden.state: " in r.out and expected in r.out, r.out
