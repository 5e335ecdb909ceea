"""Human verdicts of the review app measure the judge: `yanami agreement RUN --human REVIEW_DB` and
`yanami calibrate BENCH --human REVIEW_DB`, recounted here independently of `yanami.scoring`.

The bench is a world bench in which every second target turn's reference picture has an object
recoloured (as a faulty image generator would draw it), so the exact judge fails checks on the
dataset's own pictures and the figures are not degenerate. Three annotators give scripted verdicts.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.review.conftest import Client, Server
from yanami.review import ReviewDB, Role, Verdict

ANNOTATORS = ("ann1", "ann2", "ann3")
FIX_P, FLIP_P = 0.08, 0.25
"""Each scripted verdict is a fix with this probability, else the opposite of the judge's with the next."""


# -- the bench, the runs ------------------------------------------------------------------


def damaged_copy(src: Path, dst: Path, every: int = 2) -> set[str]:
    """``src`` written to ``dst`` with the reference picture of every ``every``-th target turn replaced
    by the same scene with a checked object recoloured; returns the items (``dialogue/tN``) changed."""
    from yanami.contract import ImagePart, ImageSource
    from yanami.judges._calibration import candidates
    from yanami.store import Dataset, DatasetWriter, Generator

    ds = Dataset(src)
    changed: set[str] = set()
    k = 0
    with DatasetWriter(dst, split=ds.manifest.split, generator=Generator(name="damaged-copy")) as w:
        for d in ds.read_all():
            for part in d.images():
                w.add_encoded(part, ds.image_bytes(part))
            turns = []
            for t in d.turns:
                if t.checks:
                    k += 1
                    bad = candidates(t).get("wrong-colour") if k % every == 0 else None
                    if bad is not None:
                        new = w.add_image(bad, ImageSource.ASSISTANT)
                        at = next(i for i, p in enumerate(t.assistant.parts) if isinstance(p, ImagePart))
                        parts = [*t.assistant.parts[:at], new, *t.assistant.parts[at + 1 :]]
                        t = t.model_copy(update={"assistant": t.assistant.model_copy(update={"parts": parts})})
                        changed.add(f"{d.id}/t{t.index}")
                turns.append(t)
            w.add_dialogue(d.model_copy(update={"turns": turns}))
    return changed


@pytest.fixture(scope="module")
def bench(review_dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("human") / "bench"
    assert damaged_copy(review_dataset, path)
    return path


@pytest.fixture(scope="module")
def oracle_run(bench: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dataset's own pictures (`reference:oracle`), judged by the exact judge (read-only)."""
    from yanami.runner import evaluate

    run = tmp_path_factory.mktemp("human-run") / "oracle"
    evaluate(bench, "reference:oracle", run)
    return run


def judge_verdicts(run: Path) -> dict[tuple[str, str], bool]:
    """(item, check) -> passed, as the run's exact judge said, read from the results database with SQL."""
    out = {}
    with sqlite3.connect(run / "results.sqlite") as conn:
        for item, checks in conn.execute(
            "SELECT item, checks FROM verdicts WHERE judge = 'exact' AND checks IS NOT NULL"
        ):
            for cid, _, _, passed, *_ in json.loads(checks):
                out[(item, cid)] = bool(passed)
    return out


# -- scripted annotators and an independent recount ---------------------------------------


def checks_of(db: ReviewDB) -> list[dict[str, Any]]:
    """Every check of the review: dialogue, item, id, kind, scenario."""
    out = []
    for row in db.table():
        data, _ = db.dialogue(row["id"])
        for t in data["turns"]:
            for c in t["checks"]:
                item = f"{row['id']}/t{t['index']}"
                out.append(
                    {"dialogue": row["id"], "item": item, "id": c["id"], "kind": c["kind"], "group": row["group"]}
                )
    return out


def scripted(checks: list[dict[str, Any]], judge: dict[tuple[str, str], bool]) -> dict[str, dict[str, str]]:
    """annotator -> {dialogue/check: verdict}: the judge's verdict, a flip or a fix, from a seeded draw."""
    rng = random.Random(20240617)
    out: dict[str, dict[str, str]] = {}
    for c in checks:
        for name in ANNOTATORS:
            r = rng.random()
            truth = judge[(c["item"], c["id"])]
            v = (
                "fix"
                if r < FIX_P
                else ("fail" if truth else "pass")
                if r < FIX_P + FLIP_P
                else ("pass" if truth else "fail")
            )
            out.setdefault(name, {})[f"{c['dialogue']}/{c['id']}"] = v
    return out


def recount(
    checks: list[dict[str, Any]],
    given: dict[str, dict[str, str]],
    judge: dict[tuple[str, str], bool],
    *,
    kept: Callable[[dict[str, Any]], bool] = lambda c: True,
) -> dict[str, Any]:
    """The figures, recounted from scratch: majority of pass/fail votes (fix left out), Cohen's kappa
    from the 2x2 table, Pearson (statistics.correlation) and Spearman (scipy) of per-item pass shares
    over atomic checks."""
    from scipy.stats import spearmanr  # type: ignore[import-untyped]

    fixes = sum(v == "fix" for votes in given.values() for v in votes.values())
    pairs, ties, no_vote = [], 0, 0
    for c in checks:
        votes = [given[n].get(f"{c['dialogue']}/{c['id']}") for n in given]
        p, f = votes.count("pass"), votes.count("fail")
        if p == f:
            ties += p > 0
            no_vote += p == 0 and any(votes)
            continue
        if kept(c):
            pairs.append((c, judge[(c["item"], c["id"])], p > f))

    def kappa(ps: list[tuple[Any, bool, bool]]) -> float:
        n = len(ps)
        both = sum(j and h for _, j, h in ps)
        neither = sum(not j and not h for _, j, h in ps)
        pj, ph = sum(j for _, j, _ in ps) / n, sum(h for _, _, h in ps) / n
        po, pe = (both + neither) / n, pj * ph + (1 - pj) * (1 - ph)
        return (po - pe) / (1 - pe)

    items: dict[str, list[tuple[bool, bool]]] = {}
    for c, j, h in pairs:
        if c["kind"] == "atomic":
            items.setdefault(c["item"], []).append((j, h))
    js = [sum(j for j, _ in v) / len(v) for v in items.values()]
    hs = [sum(h for _, h in v) / len(v) for v in items.values()]
    constant = len(set(js)) < 2 or len(set(hs)) < 2
    by_group: dict[str, list[tuple[Any, bool, bool]]] = {}
    for pair in pairs:
        by_group.setdefault(pair[0]["group"], []).append(pair)
    return {
        "fixes": fixes,
        "ties": ties,
        "no_vote": no_vote,
        "checks": len(pairs),
        "kappa": kappa(pairs),
        "agree": sum(j == h for _, j, h in pairs) / len(pairs),
        "items": len(items),
        "pearson": None if constant else statistics.correlation(js, hs),
        "spearman": None if constant else float(spearmanr(js, hs).statistic),
        "kappa_atomic": kappa([p for p in pairs if p[0]["kind"] == "atomic"]),
        "by_group": {g: (len(ps), kappa(ps)) for g, ps in by_group.items()},
    }


def new_review(url: str, bench: Path) -> tuple[ReviewDB, dict[str, str]]:
    db = ReviewDB(url, create=True)
    db.load_dataset(bench)
    tokens = {name: db.add_user(name, Role.ANNOTATOR) for name in ANNOTATORS}
    db.add_user("boss", Role.ADMIN)
    db.assign(3)
    return db, tokens


def give(db: ReviewDB, given: dict[str, dict[str, str]]) -> None:
    users = {u.name: u for u in db.users()}
    for name, verdicts in given.items():
        for key, v in verdicts.items():
            did, cid = key.split("/")
            db.set_verdict(users[name], did, cid, Verdict(v), "the check names the wrong object" if v == "fix" else "")


def all_row(out: str) -> list[str]:
    """The printed row ``all`` of the table, split in cells."""
    return next(line.split() for line in out.splitlines() if line.strip().startswith("all "))


# -- tests --------------------------------------------------------------------------------


def test_the_judge_against_three_annotators_equals_a_recount(
    cli: Callable[..., Any], db_url: str, bench: Path, oracle_run: Path
) -> None:
    db, _ = new_review(db_url, bench)
    judge = judge_verdicts(oracle_run)
    checks = checks_of(db)
    given = scripted(checks, judge)
    give(db, given)
    # an annotator rewrites one check's text: its verdicts may be on the new text, the judge read the old
    edited = next(c for c in checks if len({given[n][f"{c['dialogue']}/{c['id']}"] for n in ANNOTATORS}) == 1)
    data, version = db.dialogue(edited["dialogue"])
    k, path = next(
        (k, f"turns.{t['index']}.checks.{k}.text")
        for t in data["turns"]
        for k, c in enumerate(t["checks"])
        if c["id"] == edited["id"]
    )
    text = data["turns"][int(path.split(".")[1])]["checks"][k]["text"]
    db.edit(db.users()[0], edited["dialogue"], version, path, text + " (and nothing else)")
    db.close()
    want = recount(checks, given, judge, kept=lambda c: c is not edited)
    assert want["fixes"] > 0 and want["ties"] > 0 and 0 < want["agree"] < 1  # the draw exercises every rule

    got = cli("agreement", oracle_run, "--judge", "exact", "--human", db_url, "--json")
    assert got.code == 0, got.err
    r = json.loads(got.out)["exact vs human"]
    assert r["annotators"] == list(ANNOTATORS)
    assert r["checks"] == want["checks"] and r["items"] == want["items"]
    assert r["kappa"] == pytest.approx(want["kappa"])
    assert r["check_agreement"] == pytest.approx(want["agree"])
    assert r["pearson"] == pytest.approx(want["pearson"])
    assert r["spearman"] == pytest.approx(want["spearman"])
    lo, hi = r["pearson_95ci"]
    assert lo <= r["pearson"] <= hi
    assert r["by_kind"]["atomic"]["kappa"] == pytest.approx(want["kappa_atomic"])
    assert {g: (v["checks"], pytest.approx(v["kappa"])) for g, v in r["by_scenario"].items()} == want["by_group"]
    left = r["left_out"]
    assert (left["fix_verdicts"], left["ties"], left["no_vote"]) == (want["fixes"], want["ties"], want["no_vote"])
    assert left["edited"] == 1 and left["other_picture_items"] == 0 and left["unreviewed_checks"] == 0

    text = cli("agreement", oracle_run, "--judge", "exact", "--human", db_url)
    assert text.code == 0, text.err
    row = all_row(text.out)
    assert int(row[1]) == want["items"] and float(row[2]) == pytest.approx(want["pearson"], abs=5e-4)
    assert int(row[6]) == want["checks"] and float(row[7]) == pytest.approx(want["kappa"], abs=5e-4)
    no_vote = f"{want['no_vote']} check(s) with no pass/fail vote, " if want["no_vote"] else ""
    said = f"left out: {want['fixes']} fix verdict(s), {want['ties']} tie(s), {no_vote}1 check(s) edited in review"
    assert said in text.out
    assert "kind capability/" in text.out and "scenario Editing" in text.out


def test_verdicts_given_in_the_app_over_http_measure_the_judge(
    cli: Callable[..., Any], tmp_path: Path, bench: Path, oracle_run: Path
) -> None:
    url = str(tmp_path / "review.sqlite")
    db, tokens = new_review(url, bench)
    judge = judge_verdicts(oracle_run)
    checks = [c for c in checks_of(db) if c["group"] in ("editing", "fusion")]  # two dialogues, over HTTP
    given = scripted(checks, judge)
    unreviewed = len(checks_of(db)) - len(checks)
    with Server(db) as server:
        for name in ANNOTATORS:
            client = Client(server.port)
            assert client.sign_in(tokens[name]).status == 303
            for key, v in given[name].items():
                did, cid = key.split("/")
                form = {"check_id": cid, "verdict": v, "comment": "wrong object" if v == "fix" else ""}
                assert client.post(f"/d/{did}/check", form).status == 303
    db.close()
    want = recount(checks, given, judge)
    got = cli("agreement", oracle_run, "--judge", "exact", "--human", url, "--json")
    assert got.code == 0, got.err
    r = json.loads(got.out)["exact vs human"]
    assert (r["checks"], r["items"]) == (want["checks"], want["items"])
    assert r["kappa"] == pytest.approx(want["kappa"]) and r["pearson"] == pytest.approx(want["pearson"])
    assert set(r["by_scenario"]) == {"editing", "fusion"}
    assert r["left_out"]["unreviewed_checks"] == unreviewed > 0


def _reviewed(tmp_path: Path, bench: Path, run: Path) -> tuple[str, list[dict[str, Any]], dict[str, dict[str, str]]]:
    url = str(tmp_path / "review.sqlite")
    db, _ = new_review(url, bench)
    checks = checks_of(db)
    given = scripted(checks, judge_verdicts(run))
    give(db, given)
    db.close()
    return url, checks, given


def test_turns_whose_picture_is_not_the_datasets_are_left_out(
    cli: Callable[..., Any], tmp_path: Path, bench: Path, oracle_run: Path
) -> None:
    from yanami.contract import Results, read_rows

    url, checks, given = _reviewed(tmp_path, bench, oracle_run)
    run = tmp_path / "run"
    shutil.copytree(oracle_run, run)
    predictions, verdicts, _ = read_rows(run)
    images = {i: p.image for i, p in predictions.items() if p.kind == "turn" and p.image is not None}
    turns = sorted(images)
    swapped, tampered = turns[0], next(i for i in turns[1:] if list(images.values()).count(images[i]) == 1)
    with Results(run) as store:
        other = store.put_image(store.image(images[turns[-1]]))  # another turn's picture
        store.write(predictions[swapped].model_copy(update={"image": other}), verdicts[swapped])
        path = store.image_path(images[tampered])  # the row is right, the file is not
    path.chmod(0o644)
    path.write_bytes(path.read_bytes() + b"\0")
    judge = judge_verdicts(oracle_run)
    want = recount(checks, given, judge, kept=lambda c: c["item"] not in (swapped, tampered))
    got = cli("agreement", run, "--judge", "exact", "--human", url, "--json")
    assert got.code == 0, got.err
    r = json.loads(got.out)["exact vs human"]
    assert r["left_out"]["other_picture_items"] == 2
    labelled = recount(checks, given, judge)["checks"]
    assert r["left_out"]["other_picture_checks"] == labelled - want["checks"]
    assert r["checks"] == want["checks"] and r["kappa"] == pytest.approx(want["kappa"])


def test_a_run_of_other_pictures_is_refused_in_one_line(
    cli: Callable[..., Any], tmp_path: Path, bench: Path, oracle_run: Path
) -> None:
    from yanami.runner import evaluate

    url, _, _ = _reviewed(tmp_path, bench, oracle_run)
    blank = tmp_path / "blank"
    evaluate(bench, "reference:blank", blank)
    got = cli("agreement", blank, "--judge", "exact", "--human", url)
    assert got.code == 2 and got.out == ""
    line = got.err.strip()
    assert "\n" not in line and "Traceback" not in line
    assert str(blank) in line and "review.sqlite" in line and "dataset's own picture" in line


def test_a_review_of_another_dataset_is_refused_in_one_line(
    cli: Callable[..., Any], tmp_path: Path, review_dataset: Path, oracle_run: Path
) -> None:
    url = str(tmp_path / "other.sqlite")
    db = ReviewDB(url, create=True)
    db.load_dataset(review_dataset)  # the bench before its pictures were damaged: another dataset
    db.close()
    got = cli("agreement", oracle_run, "--judge", "exact", "--human", url)
    assert got.code == 2 and got.out == ""
    assert got.err.count("\n") == 1 and "reviewed another dataset" in got.err and "other.sqlite" in got.err


def test_calibrate_reports_the_agreement_on_the_datasets_own_pictures(
    cli: Callable[..., Any], tmp_path: Path, bench: Path, oracle_run: Path, review_dataset: Path
) -> None:
    url, checks, given = _reviewed(tmp_path, bench, oracle_run)
    out = tmp_path / "calibration.json"
    got = cli("calibrate", bench, "--judge", "exact", "--human", url, "--limit", "4", "--out", out)
    assert got.code == 0, got.err
    assert "exact vs human: sqlite:///" in got.out and "checks_by_kind" in got.out
    calibrated = json.loads(out.read_text())["human"]
    run = json.loads(cli("agreement", oracle_run, "--judge", "exact", "--human", url, "--json").out)["exact vs human"]
    want = recount(checks, given, judge_verdicts(oracle_run))
    assert calibrated["checks"] == run["checks"] == want["checks"]  # the same judge on the same pictures
    assert calibrated["kappa"] == pytest.approx(want["kappa"]) and calibrated["pearson"] == pytest.approx(
        want["pearson"]
    )
    assert calibrated["left_out"]["not_selected_items"] == 0

    other = str(tmp_path / "other.sqlite")
    db = ReviewDB(other, create=True)
    db.load_dataset(review_dataset)
    db.close()
    refused = cli("calibrate", bench, "--judge", "exact", "--human", other)
    assert refused.code == 2 and refused.err.count("\n") == 1 and "reviewed another dataset" in refused.err


def test_what_is_not_a_review_database_is_one_line_and_left_untouched(
    cli: Callable[..., Any], tmp_path: Path, oracle_run: Path
) -> None:
    results = tmp_path / "results.sqlite"
    shutil.copy(oracle_run / "results.sqlite", results)
    before = results.read_bytes()
    junk = tmp_path / "notes.txt"
    junk.write_text("not a database\n")
    for human, says in (
        (results, "not a review database"),
        (junk, "cannot read it as a review database"),
        (tmp_path / "missing.sqlite", "no such file"),
    ):
        got = cli("agreement", oracle_run, "--judge", "exact", "--human", human)
        assert got.code == 2 and got.err.count("\n") == 1 and says in got.err, got.err
    assert results.read_bytes() == before


def test_without_the_review_extra_the_error_says_how_to_install_it(
    cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, oracle_run: Path
) -> None:
    for name in [m for m in sys.modules if m == "sqlalchemy" or m.startswith(("sqlalchemy.", "yanami.review._"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "sqlalchemy", None)  # an import of it fails as if it were not installed
    got = cli("agreement", oracle_run, "--judge", "exact", "--human", tmp_path / "review.sqlite")
    assert got.code == 2 and got.err.count("\n") == 1
    assert "sqlalchemy is missing" in got.err and "pip install -e '.[review]'" in got.err


def test_a_vlm_judge_beside_the_exact_judge(
    cli: Callable[..., Any], tmp_path: Path, bench: Path, oracle_run: Path
) -> None:
    from yanami.models.fake import FakeServer

    url, checks, given = _reviewed(tmp_path, bench, oracle_run)
    run = tmp_path / "run"
    shutil.copytree(oracle_run, run)
    with FakeServer() as srv:  # its judge passes every check
        config = tmp_path / "vlm.yaml"
        config.write_text(f"kind: openai\nchat_model: judge-model\nbase_url: {srv.url}/v1\nbackoff_s: 0.01\n")
        judged = cli("judge", run, "--judge", config)
        assert judged.code == 0, judged.err
    got = cli("agreement", run, "--judge", "exact", "--judge", "vlm", "--human", url, "--json")
    assert got.code == 0, got.err
    both = json.loads(got.out)
    assert set(both) == {"exact vs human", "vlm vs human"}
    exact = recount(checks, given, judge_verdicts(oracle_run))
    assert both["exact vs human"]["kappa"] == pytest.approx(exact["kappa"])
    passes = recount(checks, given, dict.fromkeys(judge_verdicts(oracle_run), True))
    vlm = both["vlm vs human"]
    assert vlm["judge_pass"] == 1.0 and vlm["check_agreement"] == pytest.approx(passes["agree"])
    assert vlm["kappa"] == pytest.approx(passes["kappa"]) == 0.0  # a judge that passes everything: chance
    assert vlm["pearson"] is None is passes["pearson"]  # its item scores are constant
