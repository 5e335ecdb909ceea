"""``yanami prepare``: a pool read safely, screened per image, repaired per group, routed, resumable."""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import tarfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.helpers import snapshot
from yanami.construct import Group, Label, PoolManifest, prepare, read_pool
from yanami.construct._standins import StandIns
from yanami.contract import UserError
from yanami.models.fake import FakeServer


def picture(seed: int, size: tuple[int, int] = (96, 64)) -> bytes:
    """A noisy picture the filter stand-in keeps."""
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def blank(shade: int, size: tuple[int, int] = (96, 64)) -> bytes:
    """A blank canvas the filter stand-in rejects (a generation failure)."""
    buf = io.BytesIO()
    Image.new("RGB", size, (shade, shade, shade)).save(buf, format="PNG")
    return buf.getvalue()


def bomb() -> bytes:
    """A PNG whose header claims 30000 x 30000 pixels (a decompression bomb)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", 30000, 30000, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


def make_pool(root: Path) -> Path:
    """Five groups: all good; one blank (repaired); mostly blank (dropped); a lone picture; broken files."""
    pool = root / "pool"
    files = {
        "cats/a.png": picture(1),
        "cats/b.png": picture(2),
        "cats/c.png": picture(3),
        "dogs/a.png": picture(4),
        "dogs/b.png": picture(5),
        "dogs/c.png": blank(30),
        "fog/a.png": blank(200),
        "fog/b.png": blank(201),
        "fog/c.png": picture(6),
        "lone.png": picture(7),
        "junk/notes.txt": b"not an image at all",
        "junk/cut.png": picture(8)[:200],
        "junk/bomb.png": bomb(),
        "junk/again.png": picture(1),  # the same bytes as cats/a.png
        "junk/ok.png": picture(9),
        ".hidden.png": picture(10),
    }
    for rel, data in files.items():
        (pool / rel).parent.mkdir(parents=True, exist_ok=True)
        (pool / rel).write_bytes(data)
    return pool


def configs(root: Path, url: str) -> tuple[Path, Path]:
    base = f"base_url: {url}/v1\nmax_retries: 1\nbackoff_s: 0.01\nrequests_per_minute: 100000\n"
    filt, rep = root / "filter.yaml", root / "repair.yaml"
    filt.write_text(f"kind: openai\nchat_model: filter-vlm\n{base}")
    rep.write_text(f"kind: openai\nimage_model: repair-edit\n{base}")
    return filt, rep


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n") if line]  # JSON Lines: \n alone


def test_prepare_screens_repairs_routes_and_records_why(tmp_path: Path, cli) -> None:
    pool = make_pool(tmp_path)
    out = tmp_path / "pooldir"
    with FakeServer(brain=StandIns().brain) as srv:
        filt, rep = configs(tmp_path, srv.url)
        r = cli("prepare", pool, "--out", out, "--filter", filt, "--repair", rep)
        assert r.code == 0, r.err
        labels = {lab["source"]: Label.model_validate(lab) for lab in read_jsonl(out / "labels.jsonl")}
        groups = {g["group"]: Group.model_validate(g) for g in read_jsonl(out / "groups.jsonl")}
        manifest = PoolManifest.model_validate_json((out / "manifest.json").read_text())
        first = snapshot(out)
        requests = len(srv.requests)

        # every entry has one label with its reason; hidden files are not part of the pool
        assert ".hidden.png" not in labels and len(labels) == 15
        assert (
            labels["junk/notes.txt"].status == "unreadable"
            and "not a readable image" in labels["junk/notes.txt"].reason
        )
        assert labels["junk/cut.png"].status == "unreadable"
        assert labels["junk/bomb.png"].status == "unreadable" and "over the limit" in labels["junk/bomb.png"].reason
        assert labels["junk/again.png"].status == "duplicate"
        # the group rule: 2 of 3 rejected drops the group, and its good image with it
        assert groups["fog"].status == "dropped" and "more than half" in groups["fog"].reason
        assert labels["fog/c.png"].status == "dropped" and labels["fog/a.png"].category == "generation_failure"
        # 1 of 3 rejected: repaired, screened again, kept
        dogs = labels["dogs/c.png"]
        assert dogs.status == "repaired" and dogs.repair_rounds == 1 and dogs.image not in (None, dogs.sha256)
        assert groups["dogs"].status == "kept" and dogs.image in groups["dogs"].images
        # unreadable entries count as rejected: junk has 3 of 5 bad (the duplicate is cats') -> dropped
        assert groups["junk"].status == "dropped"
        # routing by the filter VLM: several images -> fusion, one image -> one of the others
        assert groups["cats"].scenario == "fusion" and groups["cats"].routed_by == "filter"
        assert groups["lone.png"].scenario in ("editing", "world_modeling", "reasoning")
        # the folder holds exactly the kept images, content-addressed
        kept = {s for g in groups.values() for s in g.images}
        on_disk = {p.stem for p in (out / "images").glob("*/*")}
        assert on_disk == kept and manifest.counts["images"] == len(kept) == 7
        assert manifest.counts["repaired"] == 1 and manifest.counts["duplicate"] == 1
        assert "cats" in r.out.split("\n")[0] or "15 entries" in r.out

        # the same command again: every answer comes from the cache, the folder is byte-identical
        r = cli("prepare", pool, "--out", out, "--filter", filt, "--repair", rep, "--concurrency", "8")
        assert r.code == 0, r.err
        assert len(srv.requests) == requests
        assert snapshot(out) == first


def test_the_output_does_not_depend_on_concurrency(tmp_path: Path) -> None:
    pool = make_pool(tmp_path)
    with FakeServer(brain=StandIns().brain, latency_s=0.05) as srv:
        filt, rep = configs(tmp_path, srv.url)
        outs = []
        for n in (1, 6):
            out = tmp_path / f"out{n}"
            prepare(pool, out, filter_spec=str(filt), repair_spec=str(rep), concurrency=n)
            outs.append({k: v for k, v in snapshot(out).items() if not k.startswith(("cache", "settings"))})
        assert srv.max_in_flight > 1
    assert outs[0] == outs[1]


def test_a_repair_that_keeps_failing_is_bounded_and_recorded(tmp_path: Path) -> None:
    pool = make_pool(tmp_path)
    bad = blank(30)
    import hashlib

    stand_ins = StandIns(repair_fails={hashlib.sha256(bad).hexdigest()[:12]})
    with FakeServer(brain=stand_ins.brain) as srv:
        filt, rep = configs(tmp_path, srv.url)
        prepare(pool, tmp_path / "out", filter_spec=str(filt), repair_spec=str(rep), rounds=3)
        repairs = srv.count("/images/")
    dogs = {lab["source"]: lab for lab in read_jsonl(tmp_path / "out" / "labels.jsonl")}["dogs/c.png"]
    # the blank repair of a blank image is the same image: one round, then the screen says no again
    assert dogs["status"] == "rejected" and "still rejected" in dogs["reason"]
    assert 1 <= repairs <= 3


def test_without_a_repair_model_rejected_images_are_dropped(tmp_path: Path) -> None:
    pool = make_pool(tmp_path)
    with FakeServer(brain=StandIns().brain) as srv:
        filt, _ = configs(tmp_path, srv.url)
        summary = prepare(pool, tmp_path / "out", filter_spec=str(filt))
        assert srv.count("/images/") == 0
    assert summary.counts["repaired"] == 0 and summary.counts["rejected"] == 3


def test_a_routes_file_routes_without_asking(tmp_path: Path, cli) -> None:
    pool = make_pool(tmp_path)
    routes = tmp_path / "routes.yaml"
    routes.write_text("cats: editing\ndogs: fusion\nlone.png: reasoning\n")
    with FakeServer(brain=StandIns().brain) as srv:
        filt, rep = configs(tmp_path, srv.url)
        r = cli("prepare", pool, "--out", tmp_path / "o", "--filter", filt, "--repair", rep, "--routes", routes)
        assert r.code == 0, r.err
        routed = sum('"scenario"' in json.dumps(body) for path, body in srv.requests if "chat" in path)
    groups = {g["group"]: g for g in read_jsonl(tmp_path / "o" / "groups.jsonl")}
    assert groups["cats"]["scenario"] == "editing" and groups["cats"]["routed_by"] == "routes"
    assert routed == 0

    routes.write_text("cats: painting\n")
    r = cli("prepare", pool, "--out", tmp_path / "o2", "--filter", filt, "--routes", routes)
    assert r.code == 2 and r.err.count("\n") == 1 and "cats: 'painting' is not a scenario" in r.err


def test_parquet_and_webdataset_pools_give_the_same_pool(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    images = {"cats": [picture(1), picture(2)], "dogs": [picture(4), blank(30)], "lone": [picture(7)]}
    table = pa.table(
        {
            "group": [g for g, ims in images.items() for _ in ims],
            "image": [{"bytes": im, "path": None} for ims in images.values() for im in ims],
        }
    )
    pq.write_table(table, tmp_path / "pool.parquet")
    with tarfile.open(tmp_path / "pool.tar", "w") as tar:
        for g, ims in images.items():
            for k, im in enumerate(ims):
                info = tarfile.TarInfo(f"{g}-{k}.png")
                info.size = len(im)
                tar.addfile(info, io.BytesIO(im))
                meta = json.dumps({"group": g}).encode()
                info = tarfile.TarInfo(f"{g}-{k}.json")
                info.size = len(meta)
                tar.addfile(info, io.BytesIO(meta))
    a = [(e.group, e.data) for e in read_pool(tmp_path / "pool.parquet")]
    b = [(e.group, e.data) for e in read_pool(tmp_path / "pool.tar")]
    assert a == b and len(a) == 5
    with FakeServer(brain=StandIns().brain) as srv:
        filt, rep = configs(tmp_path, srv.url)
        pa_out, wd_out = tmp_path / "from-parquet", tmp_path / "from-tar"
        prepare(tmp_path / "pool.parquet", pa_out, filter_spec=str(filt), repair_spec=str(rep))
        prepare(tmp_path / "pool.tar", wd_out, filter_spec=str(filt), repair_spec=str(rep))
    assert snapshot(pa_out / "images") == snapshot(wd_out / "images")
    assert read_jsonl(pa_out / "groups.jsonl") == read_jsonl(wd_out / "groups.jsonl")


def test_broken_pool_files_are_recorded_not_fatal(tmp_path: Path) -> None:
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 this is not parquet")
    entries = list(read_pool(tmp_path / "bad.parquet"))
    assert len(entries) == 1 and entries[0].data is None and "not a readable Parquet file" in (entries[0].problem or "")

    good = picture(1)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in ("a.png", "b.png"):
            info = tarfile.TarInfo(name)
            info.size = len(good)
            tar.addfile(info, io.BytesIO(good))
    first = 512 + -(-len(good) // 512) * 512
    (tmp_path / "cut.tar").write_bytes(buf.getvalue()[: first + 512 + 100])  # inside the second image
    entries = list(read_pool(tmp_path / "cut.tar"))
    assert entries[0].data == good
    assert entries[-1].data is None and "not a readable tar file" in (entries[-1].problem or "")


def test_groups_file_problems_are_one_line(tmp_path: Path, cli) -> None:
    pool = tmp_path / "pool"
    pool.mkdir()
    (pool / "a.png").write_bytes(picture(1))
    cases = {
        '{"group": "g", "images": ["../out.png"]}\n': "groups.jsonl:1: images: '../out.png' is not a path inside",
        '{"group": "g", "images": []}\n': "groups.jsonl:1: images: a non-empty list",
        '{"images": ["a.png"]}\n': "groups.jsonl:1: group:",
        "\n{nope\n": "groups.jsonl:2: not JSON",
        "[" * 100_000 + "\n": "groups.jsonl:1: JSON nested too deeply",
        '{"group": "g", "n": 1' + "0" * 5000 + "}\n": "groups.jsonl:1: not readable JSON (Exceeds the limit",
        '{"group": "g", "images": [' + "1" * 5000 + "]}\n": "groups.jsonl:1: not readable JSON (Exceeds the limit",
        # a path no file can have (JSON's escapes): one line, never ValueError or UnicodeEncodeError
        '{"group": "g", "images": ["a.png", "b\\u0000.png"]}\n': (
            "groups.jsonl:1: images: 'b\\x00.png' is not a path: it holds a NUL byte at position 1"
        ),
        '{"group": "g", "images": ["sub\\u0000/a.png"]}\n': "groups.jsonl:1: images: 'sub\\x00/a.png' is not a path",
        '{"group": "g", "images": ["\\ud800.png"]}\n': (
            "groups.jsonl:1: images: '\\ud800.png' is not a path: it holds a lone surrogate '\\ud800' at position 0"
        ),
        '{"group": "g", "images": ["a.png", "\\udcff/a.png"]}\n': (
            "groups.jsonl:1: images: '\\udcff/a.png' is not a path"
        ),
    }
    filt = tmp_path / "f.yaml"
    filt.write_text("kind: openai\nbase_url: http://127.0.0.1:9/v1\nchat_model: m\n")
    for text, expected in cases.items():
        (pool / "groups.jsonl").write_text(text)
        r = cli("prepare", pool, "--out", tmp_path / "o", "--filter", filt)
        assert r.code == 2 and r.err.count("\n") == 1 and expected in r.err, r.err
        assert "Traceback" not in r.err and not (tmp_path / "o").exists()
    # a raw line separator inside a string is data: the line is read whole (split on newline alone)
    (pool / "groups.jsonl").write_text('{"group": "g\u2028\x85h", "images": ["gone.png"]}\r\n', encoding="utf-8")
    r = cli("prepare", pool, "--out", tmp_path / "o", "--filter", filt)
    assert r.code == 0 and "1 group(s)" in r.out, r.err
    assert [g["group"] for g in read_jsonl(tmp_path / "o" / "groups.jsonl")] == ["g\u2028\x85h"]


def test_a_group_name_with_a_lone_surrogate_is_recorded_escaped(tmp_path: Path, cli) -> None:
    """A group named in a pool's JSON with a lone surrogate (groups.jsonl, a WebDataset sample's
    ``.json``) is recorded with it escaped, as a file name that is not UTF-8 is: never a crash."""
    pool = tmp_path / "pool"
    pool.mkdir()
    for k in range(2):
        (pool / f"a{k}.png").write_bytes(picture(k))
    (pool / "groups.jsonl").write_text('{"group": "g\\ud800", "images": ["a0.png", "a1.png"]}\n')
    r = cli("prepare", pool, "--out", tmp_path / "o", "--filter", "stand-ins")
    assert r.code == 0 and "Traceback" not in r.err, r.err
    assert [g["group"] for g in read_jsonl(tmp_path / "o" / "groups.jsonl")] == ["g\\ud800"]

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("s1.png", picture(1)), ("s1.json", b'{"group": "\\udfff", "scenario": "\\ud800"}')):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (tmp_path / "pool.tar").write_bytes(buf.getvalue())
    (entry,) = read_pool(tmp_path / "pool.tar")
    assert entry.group == "\\udfff" and entry.data == picture(1)


def test_out_must_be_a_preparation_of_the_same_command(tmp_path: Path) -> None:
    pool = make_pool(tmp_path)
    other = tmp_path / "taken"
    other.mkdir()
    (other / "mine.txt").write_text("keep me")
    with FakeServer(brain=StandIns().brain) as srv:
        filt, rep = configs(tmp_path, srv.url)
        with pytest.raises(UserError, match="not a prepared pool"):
            prepare(pool, other, filter_spec=str(filt))
        assert (other / "mine.txt").read_text() == "keep me"
        prepare(pool, tmp_path / "p", filter_spec=str(filt))
        with pytest.raises(UserError, match="other settings"):
            prepare(pool, tmp_path / "p", filter_spec=str(filt), repair_spec=str(rep))


def test_a_filter_that_fails_is_a_counted_rejection_and_the_next_run_asks_again(tmp_path: Path) -> None:
    pool = tmp_path / "pool"
    pool.mkdir()
    for k in range(4):
        (pool / f"{k}.png").write_bytes(picture(k))
    faults = [("/chat", "500"), ("/chat", "500")]  # the first question fails twice: retries run out
    with FakeServer(brain=StandIns().brain, faults=faults) as srv:
        filt, _ = configs(tmp_path, srv.url)
        first = prepare(pool, tmp_path / "out", filter_spec=str(filt), concurrency=1)
        assert first.errors == 1 and first.counts["rejected"] == 1
        second = prepare(pool, tmp_path / "out", filter_spec=str(filt), concurrency=1)
    assert second.errors == 0 and second.counts["rejected"] == 0 and second.counts["kept"] == 4


def test_a_world_pool_prepares_offline_with_the_stand_ins(tmp_path: Path, cli) -> None:
    out = tmp_path / "world-pool"
    r = cli("prepare", "world:1@7", "--out", out, "--filter", "stand-ins", "--repair", "stand-ins")
    assert r.code == 0, r.err
    groups = read_jsonl(out / "groups.jsonl")
    # one world dialogue per scenario, each routed by the pool's own metadata; fusion brings two pictures
    assert sorted(g["scenario"] for g in groups) == ["editing", "fusion", "reasoning", "world_modeling"]
    assert all(g["status"] == "kept" and g["routed_by"] == "pool" for g in groups)
    assert next(len(g["images"]) for g in groups if g["scenario"] == "fusion") >= 2
    first = snapshot(out)
    assert cli("prepare", "world:1@7", "--out", out, "--filter", "stand-ins", "--repair", "stand-ins").code == 0
    assert snapshot(out) == first


def test_bad_options_leave_no_folder_and_an_unfinished_run_takes_a_corrected_one(tmp_path: Path, cli) -> None:
    pool = make_pool(tmp_path)
    out = tmp_path / "o"
    for args in (("nope", "--filter", "stand-ins"), (pool, "--filter", tmp_path / "missing.yaml")):
        r = cli("prepare", *args, "--out", out)
        assert r.code == 2 and r.err.count("\n") == 1 and not out.exists()
    routes = tmp_path / "routes.yaml"
    routes.write_text("catz: editing\n")
    r = cli("prepare", pool, "--out", out, "--filter", "stand-ins", "--routes", routes)
    assert r.code == 2 and "--routes: no group named 'catz'" in r.err and not (out / "manifest.json").exists()
    routes.write_text("cats: editing\n")
    r = cli("prepare", pool, "--out", out, "--filter", "stand-ins", "--routes", routes)
    assert r.code == 0, r.err
    assert {g["group"]: g["scenario"] for g in read_jsonl(out / "groups.jsonl")}["cats"] == "editing"


def test_a_file_name_that_is_not_utf8_is_recorded_escaped(tmp_path: Path, cli) -> None:
    """A pool folder may hold a file whose name is not UTF-8 (Latin-1 from an old archive): it is
    read like any other and recorded with its odd bytes escaped, in the labels, the groups and the
    manifest; nothing crashes after the filter calls were paid."""
    import os

    pool = tmp_path / "pool"
    (pool / "street").mkdir(parents=True)
    for k in range(2):
        (pool / "street" / f"ok{k}.png").write_bytes(picture(k))
    odd = os.path.join(os.fsencode(pool / "street"), b"caf\xe9.png")  # "cafe" with a Latin-1 e-acute
    with open(odd, "wb") as f:
        f.write(picture(9))
    out = tmp_path / "pooldir"
    with FakeServer(brain=StandIns().brain) as srv:
        filt, _ = configs(tmp_path, srv.url)
        r = cli("prepare", pool, "--out", out, "--filter", filt)
    assert r.code == 0, r.err
    sources = {lab["source"] for lab in read_jsonl(out / "labels.jsonl")}
    assert "street/caf\\xe9.png" in sources and len(sources) == 3
    assert "Traceback" not in r.err


def test_a_group_routed_where_it_cannot_go_is_dropped_everywhere_alike(tmp_path: Path, cli) -> None:
    """A one-image group routed to fusion (which needs two) is dropped: the summary, the groups,
    the labels and the manifest all say so, with the same reason."""
    pool = make_pool(tmp_path)
    routes = tmp_path / "routes.yaml"
    routes.write_text("lone.png: fusion\n")
    with FakeServer(brain=StandIns().brain) as srv:
        filt, _ = configs(tmp_path, srv.url)
        r = cli("prepare", pool, "--out", tmp_path / "o", "--filter", filt, "--routes", routes)
    assert r.code == 0, r.err
    reason = "fusion needs at least 2 images, the group has 1"
    groups = {g["group"]: g for g in read_jsonl(tmp_path / "o" / "groups.jsonl")}
    lone = groups["lone.png"]
    assert lone["status"] == "dropped" and lone["reason"] == reason
    labels = [lab for lab in read_jsonl(tmp_path / "o" / "labels.jsonl") if lab["group"] == "lone.png"]
    assert labels and all(lab["status"] == "dropped" and lab["reason"].endswith(reason) for lab in labels)
    manifest = json.loads((tmp_path / "o" / "manifest.json").read_text())
    kept = [g for g in groups.values() if g["status"] == "kept"]
    assert manifest["by_scenario"]["fusion"] == sum(g["scenario"] == "fusion" for g in kept)
    assert sum(manifest["by_scenario"].values()) == len(kept)  # a dropped group is routed nowhere
    assert f"{len(kept)} of {len(groups)} kept" in r.out and f"dropped: 1 group(s): {reason}" in r.out


def test_a_fifo_in_a_pool_is_an_unreadable_entry_not_a_hang(tmp_path: Path) -> None:
    pool = tmp_path / "pool"
    (pool / "g").mkdir(parents=True)
    (pool / "g" / "a.png").write_bytes(picture(1))
    os.mkfifo(pool / "g" / "pipe.png")  # nothing ever writes to it: an ordinary open would wait forever
    with FakeServer(brain=StandIns().brain) as srv:
        filt, _ = configs(tmp_path, srv.url)
        cmd = [sys.executable, "-m", "yanami", "prepare", str(pool), "--out", str(tmp_path / "o")]
        cmd += ["--filter", str(filt)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    labels = {lab["source"]: lab for lab in read_jsonl(tmp_path / "o" / "labels.jsonl")}
    assert labels["g/pipe.png"]["status"] == "unreadable" and "not a regular file" in labels["g/pipe.png"]["reason"]
    assert labels["g/a.png"]["status"] != "unreadable"


def test_a_second_prepare_on_the_same_out_stops_at_once(tmp_path: Path, cli) -> None:
    """Two preparations into one --out would mix their files: OUT is locked while one writes it."""
    from yanami._lock import DirLock

    out = tmp_path / "o"
    out.mkdir()
    with DirLock(out):
        r = cli("prepare", "world:1", "--out", out, "--filter", "stand-ins")
    assert r.code == 2 and "is in use by another yanami process (pid" in r.err and r.err.count("\n") == 1
    assert sorted(p.name for p in out.iterdir()) == [".lock"]  # nothing written
    r = cli("prepare", "world:1", "--out", out, "--filter", "stand-ins")
    assert r.code == 0, r.err
    assert (out / "manifest.json").is_file()


KILLED_AS_IT_RENAMES = """
import os, signal, sys

real, killed_at = os.replace, sys.argv[1]

def replace(src, dst):
    if str(dst).endswith(killed_at):  # the temporary file is written, not yet in place
        os.kill(os.getpid(), signal.SIGKILL)
    real(src, dst)

os.replace = replace
sys.argv = ["yanami", *sys.argv[2:]]
from yanami.cli import main
main()
"""


@pytest.mark.parametrize("killed_at", ["labels.jsonl", ".png"])
def test_a_killed_prepare_leaves_no_temporary_file_after_the_next_run(tmp_path: Path, cli, killed_at: str) -> None:
    out = tmp_path / "o"
    cmd = [sys.executable, "-c", KILLED_AS_IT_RENAMES, killed_at, "prepare", "world:1", "--out", str(out)]
    r = subprocess.run([*cmd, "--filter", "stand-ins"], capture_output=True, text=True, timeout=120)
    assert r.returncode == -9, r.stderr
    assert [p.name for p in out.rglob(".*.tmp")] != []  # what the kill left

    r = cli("prepare", "world:1", "--out", out, "--filter", "stand-ins")
    assert r.code == 0, r.err
    assert sorted(str(p.relative_to(out)) for p in out.rglob(".*")) == [".lock"]  # the lock file stays, by design
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())
