"""End to end: `yanami eval`, `judge`, `agreement` and `calibrate` against the loopback server."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from yanami.models.fake import FakeServer


def _configs(tmp_path: Path, srv: FakeServer, **extra: str) -> tuple[Path, Path, Path]:
    tmp_path.mkdir(exist_ok=True)
    base = f"base_url: {srv.url}/v1\nbackoff_s: 0.01\nrequests_per_minute: 60000\ntimeout_s: 2\n"
    model = tmp_path / "model.yaml"
    model.write_text(f"kind: openai\nchat_model: chat-model\nimage_model: image-model\n{base}" + extra.get("model", ""))
    judge = tmp_path / "vlm.yaml"
    judge.write_text(f"kind: openai\nchat_model: judge-model\n{base}")
    infer = tmp_path / "infer.yaml"
    infer.write_text(f"kind: infer-http\nbase_url: {srv.url}\nbackoff_s: 0.01\nrequests_per_minute: 60000\n")
    return model, judge, infer


def _statuses(run: Path) -> dict[str, int]:
    db = sqlite3.connect(run / "results.sqlite")
    try:
        return dict(db.execute("SELECT status, count(*) FROM predictions GROUP BY status").fetchall())
    finally:
        db.close()


def test_eval_with_model_and_judge_config_files(cli, world_bench, tmp_path) -> None:
    faults = [("/v1/chat", "refuse"), ("/v1/images", "500"), ("/v1/images", "malformed"), ("/v1/images", "refuse")]
    with FakeServer(faults=faults) as srv, FakeServer() as judge_srv:
        model, _, _ = _configs(tmp_path, srv, model="max_retries: 0\n")
        judge = _configs(tmp_path / "judge", judge_srv)[1]  # the faults are the model's alone
        run = tmp_path / "run"
        r = cli("eval", world_bench, "--model", model, "--judge", judge, "--out", run, "--concurrency", "4")
        assert r.code == 0, r.err
        statuses = _statuses(run)
        assert statuses["refused"] == 2 and statuses["error"] == 2
        m = json.loads((run / "manifest.json").read_text())
        assert m["judge"]["name"] == "vlm" and m["judge"]["version"].startswith("vlm-v")
        assert m["model_settings"]["chat_model"] == "chat-model" and m["judge_settings"]["temperature"] == 0.0
        score = json.loads(cli("score", run, "--json").out)["runs"][0]
        assert score["coverage"]["valid"] == score["coverage"]["expected"] - 4
        # --retry-errors asks again for the two errors only
        before = srv.count("/v1/") - srv.count("/v1/models")
        again = cli("eval", world_bench, "--model", model, "--judge", judge, "--out", run, "--retry-errors")
        assert again.code == 0, again.err
        assert "2 written" in again.out
        assert _statuses(run) == {"ok": statuses["ok"] + 2, "refused": 2}
        asked = srv.count("/v1/") - srv.count("/v1/models") - before
        assert asked == 2  # only the two failed items asked the model again (beside the check of the server)


def test_rejudge_without_calling_the_model_then_agreement(cli, world_bench, tmp_path) -> None:
    with FakeServer() as srv:
        _, judge, infer = _configs(tmp_path, srv)
        run = tmp_path / "run"
        assert cli("eval", world_bench, "--model", infer, "--out", run, "--limit", "4").code == 0
        infer_calls = srv.count("/infer")
        r = cli("judge", run, "--judge", judge)
        assert r.code == 0, r.err
        assert srv.count("/infer") == infer_calls  # the model was not asked again
        assert srv.count("/v1/chat") > 0
        again = cli("judge", run, "--judge", judge)
        assert "already done" in again.out
        both = json.loads(cli("agreement", run, "--judge", "exact", "--judge", "vlm", "--json").out)
        pair = both["exact vs vlm"]
        assert pair["items"] > 10 and pair["checks"] > 10
        vlm = json.loads(cli("score", run, "--judge", "vlm", "--json").out)["runs"][0]
        assert vlm["average"]["vq"] == pytest.approx(80.0)  # the fake judge's quality, not the exact judge's
        human = tmp_path / "human.csv"
        db = sqlite3.connect(run / "results.sqlite")
        items = [r[0] for r in db.execute("SELECT item FROM predictions WHERE kind = 'question' LIMIT 8")]
        db.close()
        human.write_text("item,score\n" + "".join(f"{i},{k % 2}\n" for k, i in enumerate(items)))
        r = cli("agreement", run, "--judge", "exact", "--human", human)
        assert r.code == 0, r.err
        assert "exact vs human: 8 items, Pearson" in r.out


def test_agreement_errors_are_one_line(cli, tmp_path, world_bench) -> None:
    run = tmp_path / "run"
    assert cli("eval", world_bench, "--model", "reference:oracle", "--out", run, "--limit", "1").code == 0
    r = cli("agreement", run, "--judge", "nobody", "--judge", "exact")
    assert r.code == 2 and "no verdicts of judge 'nobody'" in r.err
    bad = tmp_path / "bad.csv"
    bad.write_text("item,score\nx/q0,high\n")
    r = cli("agreement", run, "--judge", "exact", "--human", bad)
    assert r.code == 2 and "bad.csv:2: score: 'high' is not a number" in r.err


def test_calibrate_a_judge_on_world_data(cli, world_bench, tmp_path) -> None:
    with FakeServer() as srv:
        _, judge, _ = _configs(tmp_path, srv)
        out = tmp_path / "calibration.json"
        r = cli("calibrate", world_bench, "--judge", judge, "--limit", "4", "--out", out)
        assert r.code == 0, r.err
    report = json.loads(out.read_text())
    # the fake judge passes every check: right on the truth, wrong wherever a fault was drawn
    assert report["checks_by_candidate"]["truth"]["accuracy"] == 1.0
    assert report["checks_by_candidate"]["wrong-colour"]["accuracy"] < 1.0
    assert report["checks_by_candidate"]["missing-object"]["accuracy"] < 1.0
    assert report["injection_checks"] > 0 and report["injection_flips"] == 0
    assert report["answers"]["right"]["accuracy"] == 1.0 and report["answers"]["wrong"]["accuracy"] == 0.0
    assert "injection:" in r.out


def test_an_unreachable_server_is_reported_not_scored(cli, world_bench, tmp_path) -> None:
    with FakeServer() as srv:
        url = srv.url  # a port that is free again once the server is gone
    config = tmp_path / "dead.yaml"
    config.write_text(f"kind: openai\nbase_url: {url}/v1\nchat_model: c\nmax_retries: 1\nbackoff_s: 0.01\n")
    r = cli("eval", world_bench, "--model", config, "--out", tmp_path / "run", "--limit", "1")
    # one cheap request before the run directory is made: one line, and nothing left behind
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err
    assert "the server cannot be reached" in r.err and "check base_url" in r.err
    assert not (tmp_path / "run").exists()


def test_a_run_resumes_on_a_server_restarted_elsewhere_and_names_what_really_differs(
    cli, world_bench, tmp_path
) -> None:
    """How a model is reached (base_url, timeouts, concurrency, rate, retries) may change on resume;
    what it is may not, and the refusal names only the fields that differ."""
    args = ("--limit", "1", "--out", tmp_path / "run")
    with FakeServer() as first:
        model, _, _ = _configs(tmp_path, first)
        assert cli("eval", world_bench, "--model", model, *args).code == 0
    with FakeServer() as second:  # the server came back on another port, with other limits
        text = model.read_text().replace(first.url, second.url).replace("timeout_s: 2", "timeout_s: 9")
        model.write_text(text + "max_concurrency: 3\n")
        r = cli("eval", world_bench, "--model", model, *args)
        assert r.code == 0, r.err
        model.write_text(text.replace("chat_model: chat-model", "chat_model: other-model"))
        r = cli("eval", world_bench, "--model", model, *args)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert "model_settings.chat_model='chat-model', not 'other-model'" in r.err
    assert "base_url" not in r.err and "timeout_s" not in r.err


def test_a_base_url_without_its_scheme_is_one_line(cli, world_bench, tmp_path) -> None:
    model = tmp_path / "model.yaml"
    model.write_text("kind: openai\nchat_model: m\nbase_url: 127.0.0.1:8765/v1\n")
    r = cli("eval", world_bench, "--model", model, "--out", tmp_path / "run")
    assert (
        r.code == 2 and f"{model}:3: base_url: '127.0.0.1:8765/v1' needs its scheme (http://127.0.0.1:8765/v1" in r.err
    )
    assert not (tmp_path / "run").exists()


def test_a_key_the_server_refuses_is_one_line_before_anything_is_written(cli, world_bench, tmp_path) -> None:
    with FakeServer(faults=[("/v1/models", "401")]) as srv:
        model, _, _ = _configs(tmp_path, srv)
        r = cli("eval", world_bench, "--model", model, "--out", tmp_path / "run", "--limit", "1")
        paths = [p for p, _ in srv.requests]
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert "HTTP 401 (Incorrect API key provided.); the server refused the key" in r.err
    assert paths == ["/v1/models"] and not (tmp_path / "run").exists()


def test_a_runs_cache_is_made_beside_its_start_and_never_on_bad_input(cli, world_bench, tmp_path, monkeypatch) -> None:
    import threading

    from yanami.models import ResponseCache

    real = ResponseCache._open
    made_in: list[str] = []

    def recording(self: ResponseCache) -> None:
        if not self._ready:
            made_in.append(threading.current_thread().name)
        real(self)

    monkeypatch.setattr(ResponseCache, "_open", recording)
    with FakeServer() as srv:
        model, _, _ = _configs(tmp_path, srv)
        r = cli("eval", world_bench, "--model", model, "--out", tmp_path / "bad", "--layout", "sideways")
        assert r.code == 2 and not (tmp_path / "bad").exists()
        r = cli("eval", world_bench, "--model", model, "--out", tmp_path / "run", "--limit", "2", "--concurrency", "4")
    assert r.code == 0, r.err
    # made by the thread the run starts once it is open, while its first chain is made ready, not
    # by the first request's thread (which all the others then waited for)
    assert made_in[0] == "yanami-cache-open" and (tmp_path / "run" / "cache.sqlite").is_file()
    r = cli("eval", world_bench, "--model", "reference:copy-input", "--out", tmp_path / "floor", "--limit", "2")
    assert r.code == 0, r.err
    assert not (tmp_path / "floor" / "cache.sqlite").exists()  # a model that asks no server makes no cache
