"""The runner: results per item, resume, kill -9 safety, concurrency, faults never scored."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from yanami.contract import Refused, Request, UserError
from yanami.judges import ExactJudge
from yanami.runner import _build, _chains, evaluate
from yanami.scoring import load_run, run_scores
from yanami.store import Dataset, select_dialogues


def _rows(run: Path) -> tuple[list[tuple], list[tuple]]:
    db = sqlite3.connect(run / "results.sqlite")
    try:
        return (
            db.execute("SELECT * FROM predictions ORDER BY item").fetchall(),
            db.execute("SELECT * FROM verdicts ORDER BY item, judge").fetchall(),
        )
    finally:
        db.close()


def test_oracle_scores_full_marks_and_the_manifest_records_everything(world_bench, tmp_path) -> None:
    s = evaluate(world_bench, "reference:oracle", tmp_path / "run")
    assert s.written == s.items and s.statuses == {"ok": s.items}
    m = json.loads((tmp_path / "run" / "manifest.json").read_text())
    for key in ("bench_sha256", "model", "history", "layout", "judge", "yanami_version", "global_seed", "items"):
        assert key in m
    assert m["judge"] == {"name": "exact", "version": ExactJudge.version} and m["seed"] is None
    scores = run_scores(load_run(tmp_path / "run"))
    assert scores.average["scene"] == pytest.approx(100)
    for part in ("understanding", "sc", "vq", "constraint_keeping", "correction_updating"):
        assert scores.average[part] == pytest.approx(100), part


def test_running_again_resumes_and_skips_finished_items(world_bench, tmp_path) -> None:
    first = evaluate(world_bench, "reference:stateless", tmp_path / "run", limit=4)
    rows = _rows(tmp_path / "run")
    again = evaluate(world_bench, "reference:stateless", tmp_path / "run", limit=4)
    assert again.skipped == first.items and again.written == 0
    assert _rows(tmp_path / "run") == rows


def test_rejudging_regrades_what_an_older_version_of_the_judge_graded(world_bench, tmp_path) -> None:
    from yanami.runner import rejudge

    evaluate(world_bench, "reference:stateless", tmp_path / "run", limit=2)
    _, verdicts = _rows(tmp_path / "run")
    db = sqlite3.connect(tmp_path / "run" / "results.sqlite")
    with db:  # pretend half the verdicts came from version 1 of the exact judge, and read wrong
        old = [v[0] for v in verdicts[::2]]
        db.executemany("UPDATE verdicts SET judge_version = '1', reason = 'old' WHERE item = ?", [(i,) for i in old])
    db.close()
    s = rejudge(tmp_path / "run", "exact")
    assert s.written == len(old) and s.skipped == len(verdicts) - len(old)
    assert _rows(tmp_path / "run")[1] == verdicts


def test_a_changed_setting_is_refused(world_bench, tmp_path) -> None:
    evaluate(world_bench, "reference:stateless", tmp_path / "run", limit=2)
    with pytest.raises(UserError, match="history"):
        evaluate(world_bench, "reference:stateless", tmp_path / "run", limit=2, history="self")


@pytest.mark.parametrize("history", ["gt", "self"])
def test_concurrency_never_changes_a_result(world_bench, tmp_path, history) -> None:
    evaluate(world_bench, "reference:no-coreference", tmp_path / "a", history=history, concurrency=1)
    evaluate(world_bench, "reference:no-coreference", tmp_path / "b", history=history, concurrency=5)
    a, b = _rows(tmp_path / "a"), _rows(tmp_path / "b")
    for x, y in zip(a[0] + a[1], b[0] + b[1], strict=True):
        assert x == y


def test_limit_takes_dialogues_round_robin_over_scenarios(world_dialogues) -> None:
    chosen = select_dialogues(world_dialogues, 4)
    assert len({d.scenario for d in chosen}) == 4


def test_self_history_feeds_the_models_own_images_back(world_bench, tmp_path, monkeypatch) -> None:
    """Under Self-History the history holds what the model drew; under GT-History the ground truth."""
    seen: dict[str, set[str]] = {"gt": set(), "self": set()}
    drawn: set[str] = set()

    class Painter:
        name = "painter"
        answer = None

        def __init__(self, history: str) -> None:
            self.history = history

        def generate(self, request: Request) -> bytes:
            seen[self.history] |= {im.sha256 for im in request.images()}
            import hashlib
            import io

            from PIL import Image

            img = Image.new("RGB", (512, 384), (sum(map(ord, request.item)) % 256, 40, 90))
            buf = io.BytesIO()
            img.save(buf, format="PNG")
            drawn.add(hashlib.sha256(buf.getvalue()).hexdigest())
            return buf.getvalue()

    for history in ("gt", "self"):
        monkeypatch.setattr(_build, "load_model", lambda *a, h=history: Painter(h))
        evaluate(world_bench, "painter", tmp_path / history, history=history)
    assert not seen["gt"] & drawn
    assert seen["self"] & drawn


def test_faults_are_stored_with_a_status_and_never_scored(world_bench, tmp_path, monkeypatch) -> None:
    class Flaky:
        name = "flaky"

        def answer(self, request: Request) -> str:
            n = int(request.item.rpartition("q")[2])
            if n == 0:
                raise Refused("content policy")
            if n == 1:
                raise ConnectionError("server went away")
            if n == 2:
                return ""
            if n == 3 and request.item.startswith(first_dialogue):
                return "I'm sorry, but I can't help with that."  # a plain-text refusal: the same rule
            return "A"

        def generate(self, request: Request) -> bytes:
            turn = int(request.item.rpartition("/t")[2])
            if turn % 3 == 0:
                return b"not an image"
            if turn % 3 == 1 and request.item.startswith(first_dialogue):
                raise RuntimeError("upstream rejected the key sk-leakedkey0123456789")
            return request.images()[-1].data

    first_dialogue = next(iter(Dataset(world_bench))).id + "/"
    monkeypatch.setattr(_build, "load_model", lambda *a: Flaky())
    s = evaluate(world_bench, "flaky", tmp_path / "run")
    assert s.statuses["refused"] == 9 and s.statuses["missing"] == 8 and s.statuses["error"] >= 8
    run = load_run(tmp_path / "run")
    scores = run_scores(run)
    assert scores.coverage["valid"] == s.statuses["ok"] < s.items
    # only CU questions (q3) were answered, so a scenario's understanding needs all four types: none
    assert scores.average["understanding"] is None and scores.average["CU"] is not None
    errors = [r for r in _rows(tmp_path / "run")[0] if r[6] == "error"]
    assert any("not a decodable image" in r[9] for r in errors)
    assert any("ConnectionError" in r[9] for r in errors)
    stored = [r[9] or "" for r in _rows(tmp_path / "run")[0]]
    assert any("[redacted]" in e for e in stored) and not any("sk-leaked" in e for e in stored)
    # --retry-errors asks again only for the failed items
    asked: list[str] = []

    class Fixed(Flaky):
        def answer(self, request: Request) -> str:
            asked.append(request.item)
            return "A"

        def generate(self, request: Request) -> bytes:
            asked.append(request.item)
            return request.images()[-1].data

    monkeypatch.setattr(_build, "load_model", lambda *a: Fixed())
    again = evaluate(world_bench, "flaky", tmp_path / "run", retry_errors=True)
    assert len(asked) == s.statuses["error"] == again.written
    assert again.statuses == {"ok": s.statuses["error"]}


def _count(db: Path) -> int:
    try:
        con = sqlite3.connect(db, timeout=5)
        try:
            return con.execute("SELECT count(*) FROM predictions").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def test_a_run_killed_at_any_moment_resumes_to_the_same_results(world_bench, tmp_path) -> None:
    """SIGKILL in the middle of a run (twice), then resume: exactly the rows of an uninterrupted run."""
    whole = evaluate(world_bench, "reference:stateless", tmp_path / "whole", history="self")
    cmd = [sys.executable, "-m", "yanami", "eval", str(world_bench), "--model", "reference:stateless"]
    cmd += ["--out", str(tmp_path / "killed"), "--history", "self"]
    db = tmp_path / "killed" / "results.sqlite"
    interrupted = []
    for target in (1, whole.items // 2):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None and _count(db) < target:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        interrupted.append(_count(db))
    assert any(0 < n < whole.items for n in interrupted), interrupted
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert "already done" in done.stdout
    assert _rows(tmp_path / "killed") == _rows(tmp_path / "whole")


def test_parse_worker_processes_never_change_a_result(world_bench, tmp_path) -> None:
    from yanami.world import _parse

    evaluate(world_bench, "reference:stateless", tmp_path / "one", history="self")
    _parse._PARSES.clear()  # so that the second run really parses in the workers
    evaluate(world_bench, "reference:stateless", tmp_path / "two", history="self", workers=2, concurrency=4)
    assert _rows(tmp_path / "one") == _rows(tmp_path / "two")


def test_a_bench_image_is_read_once_while_it_is_kept(world_bench, monkeypatch) -> None:
    """The questions of a dialogue start together: one of them reads (and verifies) an image, the
    others take it; the least recently shown image is dropped first when the cache is full."""
    from concurrent.futures import ThreadPoolExecutor

    dataset = Dataset(world_bench)
    parts = list({p.sha256: p for d in dataset for t in d.turns for p in t.user.parts if p.type == "image"}.values())
    reads: list[str] = []
    real = Dataset.image_bytes

    def counting(self: Dataset, part: object) -> bytes:
        reads.append(part.sha256)  # type: ignore[attr-defined]
        time.sleep(0.01)  # long enough for the other threads to ask meanwhile
        return real(self, part)  # type: ignore[arg-type]

    monkeypatch.setattr(Dataset, "image_bytes", counting)
    monkeypatch.setattr(_chains, "_IMAGES_KEPT", 2)
    runner = _chains.ChainRunner(dataset, None, None, None, None)  # type: ignore[arg-type]
    with ThreadPoolExecutor(8) as pool:
        shown = list(pool.map(runner.bench_image, [parts[0]] * 8))
    assert reads == [parts[0].sha256] and all(s is shown[0] for s in shown)
    runner.bench_image(parts[1])
    runner.bench_image(parts[0])  # shown again: now the most recent
    runner.bench_image(parts[2])  # the cache is full: parts[1] goes
    runner.bench_image(parts[0])
    runner.bench_image(parts[1])
    assert reads == [p.sha256 for p in (parts[0], parts[1], parts[2], parts[1])]


def test_a_run_resumed_under_a_newer_judge_version_is_graded_again(world_bench, tmp_path) -> None:
    """An upgrade that changes the judge keeps the model's predictions and regrades them."""
    from yanami.judges._exact import VERSION

    evaluate(world_bench, "reference:stateless", tmp_path / "run", limit=2)
    predictions, verdicts = _rows(tmp_path / "run")
    manifest = tmp_path / "run" / "manifest.json"
    m = json.loads(manifest.read_text())
    m["judge"]["version"] = "1"
    manifest.write_text(json.dumps(m))
    db = sqlite3.connect(tmp_path / "run" / "results.sqlite")
    with db:
        db.execute("UPDATE verdicts SET judge_version = '1', score = 0.0, vq = 0.0, reason = 'old'")
    db.close()
    s = evaluate(world_bench, "reference:stateless", tmp_path / "run", limit=2)
    assert s.written == 0 and s.skipped == s.items  # the model is not asked again
    assert _rows(tmp_path / "run") == (predictions, verdicts)
    assert json.loads(manifest.read_text())["judge"]["version"] == VERSION


def test_a_strategy_on_a_yanami_bench_counts_calls_and_shows_in_the_tables(world_bench, tmp_path, cli) -> None:
    import sqlite3

    from yanami.models.fake import FakeServer

    with pytest.raises(UserError, match="reference agents answer the bench's own questions only"):
        evaluate(world_bench, "reference:oracle", tmp_path / "x", strategy="cot")
    with FakeServer() as srv:
        model = tmp_path / "model.yaml"
        model.write_text(f"kind: openai\nbase_url: {srv.url}/v1\nchat_model: c\nimage_model: i\nbackoff_s: 0.01\n")
        plain = evaluate(world_bench, str(model), tmp_path / "plain", limit=4)
        best = evaluate(world_bench, str(model), tmp_path / "best", limit=4, strategy="best-of:2")
    assert plain.items == best.items and best.statuses == plain.statuses == {"ok": plain.items}
    db = sqlite3.connect(tmp_path / "best" / "results.sqlite")
    calls = dict(db.execute("SELECT kind, MAX(calls) FROM predictions GROUP BY kind").fetchall())
    db.close()
    assert calls == {"turn": 3, "question": 1}  # two drawings and a pick; an answer is one call
    md = cli("score", tmp_path / "plain", tmp_path / "best", "--format", "md").out
    assert "Test-time scaling: score against model calls per item" in md and "| best-of:2 |" in md
