"""The run directory: one writer at a time, a bench path that resolves, limits that extend,
concurrency from workers, and a bench that is not what it says stopping the run in one line."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from yanami.contract import ImagePart, Request, UserError, read_rows
from yanami.models.fake import FakeServer
from yanami.runner import _build, _run, _spec, build_request, evaluate, items_of, rejudge
from yanami.store import Dataset, select_dialogues


def _error_lines(err: str) -> list[str]:
    assert "Traceback" not in err, err
    return [line for line in err.splitlines() if line.startswith("error:")]


def _reseal(bench: Path) -> None:
    """Make the bench manifest match edited shards again (hashes and dialogue count), as a builder would."""
    import hashlib

    path = bench / "manifest.json"
    m = json.loads(path.read_text())
    for rel in m["shards"]:
        m["shards"][rel] = hashlib.sha256((bench / rel).read_bytes()).hexdigest()
    m["counts"]["dialogues"] = sum(
        1 for rel in m["shards"] for line in (bench / rel).read_text().splitlines() if line.strip()
    )
    path.write_text(json.dumps(m, indent=2) + "\n")


def _predictions(run: Path) -> list[tuple]:
    db = sqlite3.connect(run / "results.sqlite")
    try:
        return db.execute("SELECT * FROM predictions ORDER BY item").fetchall()
    finally:
        db.close()


# 2. One process at a time ----------------------------------------------------------------


def test_a_second_eval_on_the_same_run_is_refused_while_the_first_runs(cli, world_bench, tmp_path) -> None:
    gate = threading.Event()

    def slow(path: str, body: dict) -> None:
        gate.wait(60)  # the first eval's first request waits here until the second eval has been refused
        return None

    with FakeServer(brain=slow) as srv:
        model = tmp_path / "model.yaml"
        model.write_text(
            f"kind: openai\nchat_model: chat-model\nbase_url: {srv.url}/v1\nmax_retries: 0\ntimeout_s: 60\n"
            "requests_per_minute: 60000\n"
        )
        run = tmp_path / "run"
        args = ["eval", str(world_bench), "--model", str(model), "--out", str(run), "--limit", "1"]
        cmd = [sys.executable, "-m", "yanami", *args]
        first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 120
            while srv.count("/v1/chat") < 1 and first.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            assert srv.count("/v1/chat") >= 1, first.communicate(timeout=5)
            second = cli(*args)
            assert second.code == 2
            assert _error_lines(second.err) == [f"error: {run} is in use by another yanami process (pid {first.pid})"]
            assert srv.count("/v1/chat") == 1  # the second process asked the model nothing
        finally:
            gate.set()
            _, err = first.communicate(timeout=120)
        assert first.returncode == 0, err
        items = len(_predictions(run))
        assert items > 0 and srv.count("/v1/chat") == items  # every item asked once, by the first process only
    # once the first process has ended, the run is free again (the same command resumes: nothing to do)
    again = cli(*args)
    assert again.code == 0, again.err
    assert "0 written" in again.out


def test_judge_takes_the_same_lock(world_bench, tmp_path) -> None:
    from yanami.runner import DirLock

    run = tmp_path / "run"
    evaluate(world_bench, "reference:stateless", run, limit=1)
    with DirLock(run), pytest.raises(UserError, match=r"is in use by another yanami process \(pid \d+\)"):
        rejudge(run, "exact")
    assert rejudge(run, "exact").written == 0  # free again once released


# 4. The bench path -----------------------------------------------------------------------


def test_the_run_stores_the_bench_path_absolute_and_readers_check_it(
    cli, world_bench, built, tmp_path, monkeypatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    shutil.copytree(world_bench, work / "bench")
    monkeypatch.chdir(work)
    evaluate("bench", "reference:stateless", "run", limit=4)  # both given relative to the working folder
    manifest = read_rows(work / "run").manifest
    assert Path(manifest.bench).is_absolute() and Path(manifest.bench) == (work / "bench").resolve()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    r = cli("report", work / "run", "--out", "r.html", "--samples", "1")
    assert r.code == 0, r.err
    assert (elsewhere / "r.html").read_text().count('class="sample"') >= 1  # the viewer found the bench
    assert rejudge(work / "run", "exact").written == 0
    # gone: one line, naming the path and how to give the new one
    shutil.move(work / "bench", tmp_path / "moved")
    with pytest.raises(UserError, match=r"is gone \(moved or deleted\); give --bench") as gone:
        rejudge(work / "run", "exact")
    assert "\n" not in str(gone.value)
    r = cli("judge", work / "run", "--judge", "exact")
    assert r.code == 2 and len(_error_lines(r.err)) == 1 and "is gone" in r.err
    assert rejudge(work / "run", "exact", bench=tmp_path / "moved").written == 0
    # another bench at the recorded path, or given: refused (same manifest SHA-256 required)
    shutil.copytree(built, work / "bench")
    with pytest.raises(UserError, match="SHA-256 differs"):
        rejudge(work / "run", "exact")
    with pytest.raises(UserError, match="SHA-256 differs"):
        rejudge(work / "run", "exact", bench=built)
    # resuming from where the bench is now records its new place
    evaluate(tmp_path / "moved", "reference:stateless", work / "run", limit=4)
    assert read_rows(work / "run").manifest.bench == str((tmp_path / "moved").resolve())


# 5. Extending a limit --------------------------------------------------------------------


def test_the_selection_is_prefix_stable(world_dialogues) -> None:
    n = len(world_dialogues)
    everything = select_dialogues(world_dialogues, n)
    assert sorted(d.id for d in everything) == sorted(d.id for d in world_dialogues)
    for k in range(1, n + 1):
        assert select_dialogues(world_dialogues, k) == everything[:k]


def test_a_run_is_extended_by_a_larger_limit_or_none(world_bench, tmp_path) -> None:
    run = tmp_path / "run"
    small = evaluate(world_bench, "reference:stateless", run, limit=2)
    first_rows = _predictions(run)
    larger = evaluate(world_bench, "reference:stateless", run, limit=5)
    assert larger.skipped == small.items and larger.written == larger.items - small.items
    manifest = read_rows(run).manifest
    assert manifest.limit == 5 and manifest.items == larger.items
    assert set(first_rows) <= set(_predictions(run))  # what was done stays as it was
    whole = evaluate(world_bench, "reference:stateless", run)
    assert whole.skipped == larger.items and read_rows(run).manifest.limit is None
    assert _predictions(run) == _predictions(_fresh(world_bench, tmp_path / "fresh"))
    with pytest.raises(UserError, match=r"limit=None; --limit 3 would drop some of its dialogues") as smaller:
        evaluate(world_bench, "reference:stateless", run, limit=3)
    assert "\n" not in str(smaller.value)


def _fresh(bench: Path, run: Path) -> Path:
    evaluate(bench, "reference:stateless", run)
    return run


def test_a_smaller_limit_or_another_selection_is_refused(world_bench, tmp_path, monkeypatch) -> None:
    run = tmp_path / "run"
    evaluate(world_bench, "reference:stateless", run, limit=4)
    with pytest.raises(UserError, match="limit=4; --limit 2 would drop"):
        evaluate(world_bench, "reference:stateless", run, limit=2)
    real = _run.select_dialogues
    monkeypatch.setattr(_run, "select_dialogues", lambda ds, limit: real(ds, limit)[::-1])  # not prefix-stable
    with pytest.raises(UserError, match="are not the first of --limit 6"):
        evaluate(world_bench, "reference:stateless", run, limit=6)
    assert read_rows(run).manifest.limit == 4


# 6. Concurrency from workers -------------------------------------------------------------


def test_workers_alone_bring_concurrency(cli, world_bench, tmp_path, monkeypatch) -> None:
    met = threading.Barrier(2, timeout=30)
    calls = []

    class Pair:
        """Its first two calls wait for each other: with one item in flight they never meet."""

        name = "pair"
        generate = None

        def answer(self, request: Request) -> str:
            calls.append(request.item)
            if len(calls) <= 2:
                met.wait()
            return "A"

    monkeypatch.setattr(_build, "load_model", lambda *a: Pair())
    s = evaluate(world_bench, "pair", tmp_path / "run", limit=2, workers=2)
    assert s.statuses == {"ok": s.items}
    assert _spec.default_concurrency(1) == 1 and _spec.default_concurrency(3) == 6
    help_text = cli("eval", "--help").out
    assert "twice --workers" in " ".join(help_text.split())


# 8. Duplicate dialogue ids ---------------------------------------------------------------


@pytest.mark.parametrize("same_content", [True, False])
def test_a_bench_with_a_duplicate_dialogue_id_is_refused(cli, world_bench, tmp_path, same_content) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(world_bench, bench)
    shard = bench / "dialogues" / "00000.jsonl"
    lines = shard.read_text().splitlines(keepends=True)
    first = json.loads(lines[0])
    if same_content:
        lines.append(lines[0])
        where = f"dialogues/00000.jsonl:1 and dialogues/00000.jsonl:{len(lines)}"
    else:
        other = json.loads(lines[1])
        other["id"] = first["id"]
        lines[1] = json.dumps(other) + "\n"
        where = "dialogues/00000.jsonl:1 and dialogues/00000.jsonl:2"
    shard.write_text("".join(lines))
    _reseal(bench)
    r = cli("eval", bench, "--model", "reference:oracle", "--out", tmp_path / "run")
    assert r.code == 2
    (line,) = _error_lines(r.err)
    assert repr(first["id"]) in line and where in line
    assert not (tmp_path / "run" / "results.sqlite").exists()


# 9. A bench whose images are not what it says --------------------------------------------


def _first_request_image(bench: Path) -> ImagePart:
    """The first image part the runner reads: in the request of the first dialogue's first item."""
    ds = Dataset(bench)
    d = next(iter(ds))
    seen: list[ImagePart] = []

    def record(turn: int, side: str, j: int, part: ImagePart) -> bytes:
        seen.append(part)
        return ds.image_path(part).read_bytes()

    build_request(d, items_of(d)[0], "yes-first", record)
    return seen[0]


def test_a_changed_bench_image_stops_the_run_in_one_line(cli, world_bench, tmp_path) -> None:
    import io

    from PIL import Image

    bench = tmp_path / "bench"
    shutil.copytree(world_bench, bench)
    part = _first_request_image(bench)
    path = Dataset(bench).image_path(part)
    img = Image.open(path).convert("RGB")
    img.putpixel((0, 0), (255, 0, 255))
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    path.write_bytes(buf.getvalue())  # same name, other bytes
    r = cli("eval", bench, "--model", "reference:oracle", "--out", tmp_path / "run", "--concurrency", "1")
    assert r.code == 2
    (line,) = _error_lines(r.err)
    assert part.sha256[:12] in line and part.sha256[-8:] in line  # it names the image (perhaps abbreviated)
    assert "match" in line


def test_a_169_megapixel_bench_image_stops_the_run_in_one_line(cli, world_bench, tmp_path) -> None:
    import hashlib
    import io

    from PIL import Image

    bench = tmp_path / "bench"
    shutil.copytree(world_bench, bench)
    part = _first_request_image(bench)
    buf = io.BytesIO()
    Image.new("1", (13000, 13000), 1).save(buf, format="PNG")  # one colour: a few kilobytes
    data = buf.getvalue()
    sha = hashlib.sha256(data).hexdigest()
    (bench / "images" / sha[:2]).mkdir(exist_ok=True)
    (bench / "images" / sha[:2] / f"{sha}.png").write_bytes(data)
    for shard in (bench / "dialogues").glob("*.jsonl"):  # the dialogues now name the big image instead
        shard.write_text(shard.read_text().replace(part.sha256, sha))
    _reseal(bench)
    r = cli("eval", bench, "--model", "reference:oracle", "--out", tmp_path / "run", "--concurrency", "1")
    assert r.code == 2
    (line,) = _error_lines(r.err)
    assert sha[:12] in line and sha[-8:] in line and "pixels" in line
