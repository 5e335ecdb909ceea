"""Reading dataset directories: streamed dialogues, lazy images, a pixel limit."""

from __future__ import annotations

import io
import json
import re
import shutil
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageFile

from tests.helpers import edit_line
from yanami.contract import ImagePart, ImageSource, UserError, sha256_hex
from yanami.store import Dataset, ImageProblem, image_relpath, validate_dataset
from yanami.synthetic import synthetic_dialogue


def test_iterates_dialogues_in_order(built: Path) -> None:
    ds = Dataset(built)
    assert len(ds) == 8
    assert [d.id for d in ds] == [synthetic_dialogue(i, seed=7)[0].id for i in range(8)]


def test_iteration_is_lazy(built: Path) -> None:
    it = iter(Dataset(built))
    first = next(it)
    assert first.id == synthetic_dialogue(0, seed=7)[0].id


def test_images_open_lazily_with_their_declared_size(built: Path) -> None:
    ds = Dataset(built)
    part = next(iter(ds)).images()[0]
    img = ds.open_image(part)
    assert img.size == (part.width, part.height)
    assert img.format == "PNG"
    img.load()


def test_pixel_limit_applies_when_opening(built: Path) -> None:
    ds = Dataset(built, max_pixels=100)
    part = next(iter(ds)).images()[0]
    with pytest.raises(ImageProblem, match="over the limit of 100"):
        ds.open_image(part)


def test_pixel_limit_applies_to_raw_bytes() -> None:
    from yanami.store import open_image_bytes

    buf = io.BytesIO()
    Image.new("RGB", (300, 300)).save(buf, format="PNG")
    with pytest.raises(ImageProblem, match="90000 pixels is over the limit of 1000"):
        open_image_bytes(buf.getvalue(), max_pixels=1000)


def test_not_a_dataset(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such directory"):
        Dataset(tmp_path / "missing")
    with pytest.raises(UserError, match=r"no manifest\.json"):
        Dataset(tmp_path)


# Damage met while reading is one line naming the file, never a traceback. ------------------


def _first_image_part(ds: Path) -> ImagePart:
    return next(iter(Dataset(ds))).images()[0]


def _update_shard_checksum(ds: Path) -> None:
    """Make the manifest vouch for the shard again after a test changed it on purpose."""
    m = json.loads((ds / "manifest.json").read_text())
    m["shards"]["dialogues/00000.jsonl"] = sha256_hex((ds / "dialogues" / "00000.jsonl").read_bytes())
    (ds / "manifest.json").write_text(json.dumps(m, indent=2))


def test_non_utf8_bytes_in_a_shard_are_one_line(dataset: Path, cli: Callable[..., Any]) -> None:
    shard = dataset / "dialogues" / "00000.jsonl"
    lines = shard.read_bytes().splitlines(keepends=True)
    lines[2] = lines[2].replace(b'"id":', b'"id\xff\xfe":', 1)
    shard.write_bytes(b"".join(lines))
    _update_shard_checksum(dataset)
    with pytest.raises(UserError, match=r"00000\.jsonl:3: not UTF-8 \(byte \d+ of the line"):
        list(Dataset(dataset))
    r = cli("stats", dataset)
    assert r.code == 2
    assert "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1
    assert "00000.jsonl:3: not UTF-8" in r.err
    assert any(str(p).startswith("dialogues/00000.jsonl:3: -: not UTF-8 (byte ") for p in validate_dataset(dataset))


def test_a_changed_shard_is_refused(dataset: Path) -> None:
    # The manifest (whose SHA-256 is the bench identity) vouches for every shard's bytes.
    edit_line(dataset, 1, lambda o: o["turns"][0]["user"]["parts"][0].update(text="something else"))
    with pytest.raises(UserError, match=r"00000\.jsonl: its bytes do not match its checksum in manifest\.json"):
        list(Dataset(dataset))


def test_a_missing_shard_is_one_line(dataset: Path, cli: Callable[..., Any]) -> None:
    (dataset / "dialogues" / "00000.jsonl").unlink()
    with pytest.raises(UserError, match=r"shards: dialogues/00000\.jsonl: shard file is missing"):
        Dataset(dataset)
    r = cli("stats", dataset)
    assert r.code == 2 and "shard file is missing" in r.err and "Traceback" not in r.err


def test_a_symlinked_shard_is_not_followed(dataset: Path, tmp_path: Path) -> None:
    shard = dataset / "dialogues" / "00000.jsonl"
    outside = tmp_path / "outside.jsonl"
    shutil.move(str(shard), outside)
    shard.symlink_to(outside)
    with pytest.raises(UserError, match=r"dialogues/00000\.jsonl: shard is a symbolic link; refusing to follow it"):
        Dataset(dataset)
    problems = [str(p) for p in validate_dataset(dataset)]
    assert "dialogues/00000.jsonl:0: -: shard is a symbolic link; refusing to follow it" in problems, problems
    assert not any(":1:" in p for p in problems), problems  # nothing was read through the link


def test_a_symlinked_dialogues_folder_is_not_followed(dataset: Path, tmp_path: Path) -> None:
    shutil.move(str(dataset / "dialogues"), tmp_path / "elsewhere")
    (dataset / "dialogues").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UserError, match=r"dialogues/ is a symbolic link"):
        Dataset(dataset)
    assert "dialogues:0: -: is a symbolic link; refusing to follow it" in [str(p) for p in validate_dataset(dataset)]


@pytest.mark.parametrize("listed", ["../x.jsonl", "/tmp/x.jsonl", "dialogues/../../x.jsonl", "dialogues/a/b.jsonl"])
def test_a_shard_path_leaving_the_dataset_is_refused(dataset: Path, tmp_path: Path, listed: str) -> None:
    # Before, such a shard was skipped silently: a bench could lose dialogues without a word.
    m = json.loads((dataset / "manifest.json").read_text())
    m["shards"][listed] = "0" * 64
    (dataset / "manifest.json").write_text(json.dumps(m, indent=2))
    with pytest.raises(UserError, match="not a shard path inside the dataset"):
        Dataset(dataset)
    problems = [str(p) for p in validate_dataset(dataset)]
    assert any(p.startswith("manifest.json:") and f"shards.{listed}: not a shard path inside" in p for p in problems)


def test_a_symlinked_image_is_one_line_naming_the_dataset_and_file(dataset: Path, tmp_path: Path) -> None:
    part = _first_image_part(dataset)
    rel = image_relpath(part.sha256, part.format)
    outside = tmp_path / "outside.png"
    shutil.copy(dataset / rel, outside)
    (dataset / rel).unlink()
    (dataset / rel).symlink_to(outside)
    with pytest.raises(UserError, match=rf"^{re.escape(str(dataset))}: image file {rel} is a symbolic link") as exc:
        Dataset(dataset).image_bytes(part)
    assert "\n" not in str(exc.value)
    # validate reports it as a problem, not an exception
    problems = [str(p) for p in validate_dataset(dataset)]
    assert any(f"image file {rel} is a symbolic link" in p for p in problems), problems


def test_image_bytes_are_verified_against_their_name(dataset: Path, cli: Callable[..., Any]) -> None:
    # Same file name, other bytes: the manifest (the bench identity) would not change, so
    # reading must notice instead.
    part = _first_image_part(dataset)
    rel = image_relpath(part.sha256, part.format)
    buf = io.BytesIO()
    Image.new("RGB", (part.width, part.height), "red").save(buf, format="PNG")
    (dataset / rel).write_bytes(buf.getvalue())
    with pytest.raises(UserError, match=rf"image file {rel}: its bytes do not match its name"):
        Dataset(dataset).image_bytes(part)
    with pytest.raises(ImageProblem):  # code that skips unusable images still can
        Dataset(dataset).open_image(part)
    r = cli("export", dataset, "--out", dataset.parent / "pq")
    assert r.code == 2 and "its bytes do not match its name" in r.err and "Traceback" not in r.err


def _png_header(width: int, height: int) -> bytes:
    """A PNG that declares a size and holds one tiny, truncated data chunk."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64))


def test_pixel_limit_is_applied_to_the_header_before_decoding(dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 13,000 x 13,000 = 169 megapixels: refused from the header, never decoded.
    data = _png_header(13_000, 13_000)
    part = ImagePart(sha256=sha256_hex(data), width=13_000, height=13_000, source=ImageSource.USER)
    path = dataset / image_relpath(part.sha256, part.format)
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)

    def no_decoding(self: Image.Image) -> None:
        raise AssertionError("decoded")

    monkeypatch.setattr(ImageFile.ImageFile, "load", no_decoding)
    with pytest.raises(UserError, match=r"13000x13000 = 169000000 pixels is over the limit of 40000000") as exc:
        Dataset(dataset).image_bytes(part)
    assert image_relpath(part.sha256, "png") in str(exc.value)


def test_read_all_reads_every_dialogue_and_restores_the_collector(built: Path) -> None:
    import gc

    ds = Dataset(built)
    assert gc.isenabled()
    read = ds.read_all()
    assert [d.id for d in read] == [d.id for d in ds]
    assert gc.isenabled()
    # what was read waits in the oldest generation, not in the young one for a collection to walk it
    oldest = {id(o) for o in gc.get_objects(generation=2)}
    assert all(id(d.turns) in oldest for d in read)  # (a model's own fields: tracked containers)
    assert gc.get_freeze_count() == 0  # nothing left out of the collector for good
    gc.disable()
    try:
        ds.read_all()
        assert not gc.isenabled()  # a caller's own choice is kept
    finally:
        gc.enable()


# The fast scan: what reading checks, without making the Dialogues. -------------------------


def test_a_scan_gives_each_dialogue_s_fields_and_makes_the_same_dialogue(built: Path) -> None:
    from yanami.contract import group_of
    from yanami.runner._items import items_of

    ds = Dataset(built)
    read = list(ds.located())
    scanned = list(ds.scanned())
    assert [s.where for s in scanned] == [where for where, _ in read]
    for s, (_, d) in zip(scanned, read, strict=True):
        assert not isinstance(s.fields, type(d))  # the fast decoder's object: no Dialogue made yet
        assert (s.fields.id, group_of(s.fields)) == (d.id, d.group)
        assert items_of(s.fields) == items_of(d)  # what a run counts reads alike on both
        assert ds.dialogue(s) == d
    assert [f.id for f in ds.fields()] == [d.id for _, d in read]


def test_a_scan_refuses_a_line_as_reading_does_and_leaves_an_odd_one_to_pydantic(dataset: Path) -> None:
    def odd(o: dict[str, Any]) -> None:  # pydantic takes it; the fast path's consistency rules do not
        o["turns"][0]["index"] = 5

    edit_line(dataset, 2, odd)
    edit_line(dataset, 3, lambda o: o.update(turns=[]))
    _update_shard_checksum(dataset)
    ds = Dataset(dataset)
    scan = ds.scanned()
    next(scan)
    second = next(scan)
    assert second.fields.turns[0].index == 5 and ds.dialogue(second) is second.fields  # made by pydantic already
    with pytest.raises(UserError, match=r"00000\.jsonl:3: invalid dialogue \(1 problems; run `yanami validate`\)"):
        next(scan)
    with pytest.raises(UserError, match=r"00000\.jsonl:3: invalid dialogue"):
        list(ds)  # the same line, the same error
