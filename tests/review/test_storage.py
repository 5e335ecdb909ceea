"""The review store on SQLite and on PostgreSQL: the same code, the same guarantees."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.review.conftest import Review, judge_rest
from yanami.contract import UserError
from yanami.review import Conflict, Decision, ReviewDB, ReviewError, Role, Verdict, export_approved
from yanami.review._db import SCHEMA_VERSION, T, current_schema_version, schema_version
from yanami.store import Dataset, validate_dataset

TEXT = "turns.0.user.parts.0.text"


def test_opening_runs_the_migrations_once_and_refuses_a_newer_schema(db_url: str, review_dataset: Path) -> None:
    db = ReviewDB(db_url, create=True)
    assert current_schema_version(db) == SCHEMA_VERSION
    db.close()
    again = ReviewDB(db_url)  # nothing left to apply: the version rows stay as they were
    with again.begin() as conn:
        assert conn.execute(sa.select(schema_version.c.version)).scalars().all() == list(range(1, SCHEMA_VERSION + 1))
        conn.execute(schema_version.insert(), {"version": SCHEMA_VERSION + 1})
    again.close()
    with pytest.raises(UserError, match=f"schema version {SCHEMA_VERSION + 1} is newer"):
        ReviewDB(db_url)


def test_assign_spreads_the_load_and_tops_up(db_url: str, review_dataset: Path) -> None:
    db = ReviewDB(db_url, create=True)
    assert db.load_dataset(review_dataset) == 4
    for name in ("a", "b", "c"):
        db.add_user(name, Role.ANNOTATOR)
    db.add_user("boss", Role.ADMIN)
    assert db.assign(2) == 8
    assert db.assign(2) == 0  # idempotent
    loads = {u.name: len(db.queue(u)) for u in db.users()}
    assert loads["boss"] == 0 and sorted(loads[n] for n in "abc") == [2, 3, 3]
    assert db.assign(3) == 4  # tops every dialogue up to three distinct annotators
    assert all(sorted(r["assigned"]) == ["a", "b", "c"] for r in db.table())
    with pytest.raises(UserError, match="only 3 annotator"):
        db.assign(4)
    db.close()


def test_a_sign_in_token_is_spent_once(review: Review) -> None:
    cookie, session = review.db.redeem(review.tokens["ann1"])
    assert session.user.name == "ann1" and review.db.session(cookie) == session
    with pytest.raises(ReviewError, match="not valid or was already used") as caught:
        review.db.redeem(review.tokens["ann1"])
    assert caught.value.status == 401
    assert review.db.session("forged") is None


def test_a_stale_edit_is_a_conflict_and_never_overwrites(review: Review) -> None:
    db = review.db
    ann1, ann2 = (u for u in db.users() if u.name in ("ann1", "ann2"))
    did = db.table()[0]["id"]
    data, version = db.dialogue(did)
    original = data["turns"][0]["user"]["parts"][0]["text"]
    assert version == 0
    assert db.edit(ann1, did, 0, TEXT, "first") == 1
    with pytest.raises(Conflict) as caught:
        db.edit(ann2, did, 0, TEXT, "second")
    c = caught.value
    assert (c.current, c.yours, c.current_version, c.by) == ("first", "second", 1, "ann1")
    data, version = db.dialogue(did)
    assert data["turns"][0]["user"]["parts"][0]["text"] == "first" and version == 1
    [edit] = db.edits(did)
    assert (edit.version, edit.user, edit.before, edit.after, edit.path) == (1, "ann1", original, "first", TEXT)


@pytest.mark.parametrize(
    ("path", "value", "status", "message"),
    [
        ("meta.generator", "x", 422, "not an editable text"),
        ("turns.99.user.parts.0.text", "x", 422, "no such field"),
        ("questions.0.text", "", 422, "empty; write the text"),
        (TEXT, "x" * 20_001, 413, "20001 characters, at most 20000"),
        (TEXT, "  \n ", 422, "empty; write the text"),
        (TEXT, "a\x00b", 422, "a NUL character"),
        (TEXT, "lone \ud800 surrogate", 422, "not valid Unicode"),
        ("questions.0.choices", "only one", 422, "at least two options"),
        ("questions.0.choices", "the red cube\nThe  red cube ", 422, "option B repeats option A"),
    ],
)
def test_a_bad_edit_is_refused_and_changes_nothing(
    review: Review, path: str, value: str, status: int, message: str
) -> None:
    db = review.db
    ann1 = next(u for u in db.users() if u.name == "ann1")
    did = db.table()[0]["id"]
    before = db.dialogue(did)
    with pytest.raises(ReviewError, match=message) as caught:
        db.edit(ann1, did, 0, path, value)
    assert caught.value.status == status
    assert db.dialogue(did) == before and db.edits(did) == []


def test_concurrent_editors_lose_no_update(review: Review) -> None:
    """Eight threads each make five edits, retrying on conflict: every edit lands, in order."""
    db = review.db
    ann1 = next(u for u in db.users() if u.name == "ann1")
    did = db.table()[0]["id"]
    errors: list[BaseException] = []

    def editor(k: int) -> None:
        try:
            for n in range(5):
                while True:
                    _, version = db.dialogue(did)
                    try:
                        db.edit(ann1, did, version, TEXT, f"editor {k} edit {n}")
                        break
                    except Conflict:
                        continue
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=editor, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    edits = db.edits(did)
    assert [e.version for e in edits] == list(range(1, 41))
    assert all(a.after == b.before for a, b in itertools.pairwise(edits))  # each built on the last
    data, version = db.dialogue(did)
    assert version == 40 and data["turns"][0]["user"]["parts"][0]["text"] == edits[-1].after


def test_majority_adjudication_and_export(review: Review, tmp_path: Path) -> None:
    db = review.db
    users = {u.name: u for u in db.users()}
    rows = db.table()
    ids = [r["id"] for r in rows]
    a, b = users["ann1"], users["ann2"]
    check = json.loads(json.dumps(db.dialogue(ids[0])[0]))["turns"]
    first_check = next(c["id"] for t in check for c in t["checks"])
    db.set_verdict(a, ids[0], first_check, Verdict.PASS, "")
    db.set_verdict(b, ids[0], first_check, Verdict.FAIL, "")
    with pytest.raises(ReviewError, match="a fix needs a comment"):
        db.set_verdict(a, ids[0], first_check, Verdict.FIX, " ")
    db.edit(a, ids[0], 0, TEXT, "Edited by review <b>.")
    with pytest.raises(ReviewError, match="not judged yet") as unjudged:
        db.decide(a, ids[0], Decision.APPROVE, "")  # a decision needs every check judged
    assert unjudged.value.status == 422 and db.table()[0]["decisions"] == {}
    for did in ids[:3]:
        judge_rest(db, a, did)
        judge_rest(db, b, did)
        db.decide(a, did, Decision.APPROVE, "")
    db.decide(b, ids[0], Decision.APPROVE, "")  # 2 of 2: approved
    db.decide(b, ids[1], Decision.REJECT, "")  # split: undecided until adjudicated
    db.decide(b, ids[2], Decision.REFINE, "")
    db.adjudicate(users["boss"], ids[1], Decision.APPROVE, "fine")
    finals = {r["id"]: r["final"] for r in db.table()}
    assert finals == {ids[0]: "approve", ids[1]: "approve", ids[2]: None, ids[3]: None}

    out = tmp_path / "bench"
    done = export_approved(db, out)
    assert (done.dialogues, done.reviewed, done.undecided) == (2, 4, 2)
    assert validate_dataset(out) == []
    exported = {d.id: d for d in Dataset(out)}
    assert sorted(exported) == sorted(ids[:2])
    assert exported[ids[0]].turns[0].user.text() == "Edited by review <b>."
    record = exported[ids[0]].meta.params["review"]
    assert record["decisions"] == {"ann1": "approve", "ann2": "approve"}
    assert record["checks"]["ann1"][first_check] == "pass" and record["checks"]["ann2"][first_check] == "fail"
    assert [e["after"] for e in record["edits"]] == ["Edited by review <b>."]
    assert exported[ids[1]].meta.params["review"]["adjudicated"] == "approve"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["generator"]["name"] == "review"
    assert manifest["generator"]["params"]["review"]["approved"] == 2
    assert "fleiss_kappa_decisions" in manifest["generator"]["params"]["review"]["agreement"]["overall"]

    with pytest.raises(UserError, match="exact copies of training images"):  # the source itself as TRAIN
        export_approved(db, tmp_path / "leaky", exclude=db.dataset_path())
    assert not (tmp_path / "leaky").exists()


def test_a_locked_database_is_one_line_and_loses_nothing(review_dataset: Path, tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "r.sqlite"
    ReviewDB(str(path), create=True).load_dataset(review_dataset)
    db = ReviewDB(str(path), wait_s=0.2)
    token = db.add_user("ann1", Role.ANNOTATOR)
    db.assign(1)
    ann1 = db.users()[0]
    did = db.table()[0]["id"]
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(ReviewError, match=r"database .*r\.sqlite: database is locked") as caught:
            db.edit(ann1, did, 0, TEXT, "while locked")
        assert caught.value.status == 503
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert db.dialogue(did)[1] == 0
    assert db.edit(ann1, did, 0, TEXT, "after the lock") == 1
    assert db.redeem(token)[1].user.name == "ann1"
    with db.begin() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(T["edits"])).scalar_one() == 1


def test_verdicts_change_until_the_decision_which_is_final_and_every_one_is_kept(
    review: Review, tmp_path: Path
) -> None:
    db = review.db
    users = {u.name: u for u in db.users()}
    did = db.table()[0]["id"]
    check, other = [c["id"] for t in db.dialogue(did)[0]["turns"] for c in t["checks"]][:2]
    db.set_verdict(users["ann1"], did, check, Verdict.PASS, "")
    db.set_verdict(users["ann1"], did, check, Verdict.PASS, "")  # the same again: nothing new
    db.set_verdict(users["ann1"], did, check, Verdict.FIX, "the cube is blue")
    with pytest.raises(ReviewError, match="a skip needs a comment"):
        db.set_verdict(users["ann1"], did, other, Verdict.SKIP, "")
    db.set_verdict(users["ann1"], did, other, Verdict.SKIP, "the picture is too dark to tell")
    judge_rest(db, users["ann1"], did)
    db.decide(users["ann1"], did, Decision.REJECT, "")
    db.decide(users["ann1"], did, Decision.REJECT, "")  # the same again: nothing new
    # blind review holds: once decided, the others' verdicts are shown, so nothing changes any more
    for change in (
        lambda: db.decide(users["ann1"], did, Decision.APPROVE, "fixed"),
        lambda: db.set_verdict(users["ann1"], did, check, Verdict.PASS, ""),
    ):
        with pytest.raises(ReviewError, match="is final") as final:
            change()
        assert final.value.status == 409
    judge_rest(db, users["ann2"], did)
    db.decide(users["ann2"], did, Decision.APPROVE, "")
    given = [(h["user"], h["check"], h["value"], h["comment"], h["current"]) for h in db.verdict_history(did)]
    assert given[:3] == [
        ("ann1", check, "pass", "", False),
        ("ann1", check, "fix", "the cube is blue", True),
        ("ann1", other, "skip", "the picture is too dark to tell", True),
    ]
    decisions = [g for g in given if g[1] is None]
    assert decisions == [("ann1", None, "reject", "", True), ("ann2", None, "approve", "", True)]
    assert all(h["at"] for h in db.verdict_history(did))
    row = next(r for r in db.table() if r["id"] == did)
    assert row["decisions"] == {"ann1": "reject", "ann2": "approve"} and row["final"] is None
    assert row["checks"]["ann1"][check] == "fix" and row["checks"]["ann1"][other] == "skip"
    db.adjudicate(users["boss"], did, Decision.APPROVE, "the fix is an edit away")
    export_approved(db, tmp_path / "out")
    [exported] = list(Dataset(tmp_path / "out"))
    record = exported.meta.params["review"]["verdict_history"]
    assert [(h["user"], h["value"]) for h in record if h["check"] is None] == [("ann1", "reject"), ("ann2", "approve")]


def test_a_check_most_annotators_failed_waits_for_the_admin_and_the_export_follows_them(
    review: Review, tmp_path: Path
) -> None:
    db = review.db
    users = {u.name: u for u in db.users()}
    did = db.table()[0]["id"]
    data = db.dialogue(did)[0]
    failed, split = [c["id"] for t in data["turns"] for c in t["checks"]][:2]
    db.set_verdict(users["ann1"], did, failed, Verdict.FAIL, "")
    db.set_verdict(users["ann2"], did, failed, Verdict.FAIL, "")
    db.set_verdict(users["ann1"], did, split, Verdict.FAIL, "")  # one of two: not a majority
    for name in ("ann1", "ann2"):
        judge_rest(db, users[name], did)
        db.decide(users[name], did, Decision.APPROVE, "")
    row = next(r for r in db.table() if r["id"] == did)
    assert row["final"] == "approve" and row["failed_checks"] == [failed] and row["open_checks"] == [failed]
    held = export_approved(db, tmp_path / "held")
    assert (held.dialogues, held.held) == (0, 1)  # never shipped as ground truth while it waits
    with pytest.raises(ReviewError, match="pass or fail"):
        db.adjudicate_check(users["boss"], did, failed, Verdict.FIX, "")
    db.adjudicate_check(users["boss"], did, failed, Verdict.FAIL, "the sphere is not there")
    done = export_approved(db, tmp_path / "out")
    assert (done.dialogues, done.held, done.dropped_checks) == (1, 0, 1)
    [exported] = list(Dataset(tmp_path / "out"))
    ids = [c.id for t in exported.turns for c in t.checks]
    assert failed not in ids and split in ids and len(ids) == sum(len(t["checks"]) for t in data["turns"]) - 1
    assert all(failed not in q.aligned_checks for q in exported.questions)
    assert exported.meta.params["review"]["dropped_checks"] == [failed]
    assert validate_dataset(tmp_path / "out") == []
    db.adjudicate_check(users["boss"], did, failed, Verdict.PASS, "it is there after all")  # the latest counts
    again = export_approved(db, tmp_path / "again")
    assert again.dropped_checks == 0
    assert failed in [c.id for t in next(iter(Dataset(tmp_path / "again"))).turns for c in t.checks]


def test_a_version_1_database_is_brought_up_to_date_with_its_data(review: Review) -> None:
    db = review.db
    ann1 = next(u for u in db.users() if u.name == "ann1")
    did = db.table()[0]["id"]
    db.edit(ann1, did, 0, TEXT, "made under version 1")
    with db.begin() as conn:  # what a database written by the first release holds
        for name in (
            "verdict_history", "removed_users", "snapshots", "instance", "check_adjudications", "flags", "guidelines",
            "item_times",
        ):  # fmt: skip
            T[name].drop(conn)
        conn.execute(schema_version.delete().where(schema_version.c.version > 1))
    db.close()
    again = ReviewDB(review.db.url.replace("postgresql+psycopg://", "postgresql://"))
    assert current_schema_version(again) == SCHEMA_VERSION == 5
    assert again.revert(ann1, did, 1, 0) == 2 and again.edits(did)[0].after == "made under version 1"
    judge_rest(again, ann1, did)
    again.decide(ann1, did, Decision.APPROVE, "")
    assert [h["value"] for h in again.verdict_history(did) if h["check"] is None] == ["approve"]
    again.close()
