"""New sign-in links and removing users: in the store (SQLite and PostgreSQL), over HTTP and on
the command line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.review.conftest import Client, Review, Server, judge_rest
from yanami.contract import UserError
from yanami.review import Decision, ReviewDB, ReviewError, Verdict


def test_a_new_link_replaces_the_unspent_one(review: Review) -> None:
    db = review.db
    new = db.relink("ann1")
    assert new != review.tokens["ann1"]
    with pytest.raises(ReviewError, match="not valid or was already used"):
        db.redeem(review.tokens["ann1"])
    cookie, session = db.redeem(new)
    assert session.user.name == "ann1" and db.session(cookie) is not None
    with pytest.raises(ReviewError, match="not valid or was already used"):
        db.redeem(new)
    assert db.redeem(db.relink("ann1"))[1].user.name == "ann1"  # a spent link can be re-issued too
    with pytest.raises(UserError, match="'nobody': no such user"):
        db.relink("nobody")


def test_removing_a_user_ends_their_sessions_and_keeps_their_verdicts(review: Review) -> None:
    db = review.db
    users = {u.name: u for u in db.users()}
    ann1 = users["ann1"]
    ids = [r["id"] for r in db.table()]
    check = next(c["id"] for t in db.dialogue(ids[0])[0]["turns"] for c in t["checks"])
    cookie, _ = db.redeem(review.tokens["ann1"])
    db.set_verdict(ann1, ids[0], check, Verdict.FAIL, "")
    judge_rest(db, ann1, ids[0])
    db.decide(ann1, ids[0], Decision.REJECT, "wrong colour")
    db.edit(ann1, ids[0], 0, "turns.0.user.parts.0.text", "ann1 was here")
    mine = sum(1 for r in db.table() if "ann1" in r["assigned"])
    link = db.relink("ann1")

    assert db.remove_user("ann1") == (1, mine - 1)  # one session; every assignment but the decided one
    assert db.session(cookie) is None
    with pytest.raises(ReviewError, match="not valid"):
        db.redeem(link)
    assert [u.name for u in db.users()] == ["ann2", "boss"]
    assert [u.name for u in db.users(removed=True)] == ["ann1"]
    row = next(r for r in db.table() if r["id"] == ids[0])
    assert row["decisions"]["ann1"] == "reject" and row["checks"]["ann1"][check] == "fail"
    assert db.verdicts(ids[0])["ann1"]["comment"] == "wrong colour" and db.edits(ids[0])[0].user == "ann1"
    assert all(r["assigned"] == ["ann2"] for r in db.table() if r["id"] != ids[0])
    for call in (lambda: db.remove_user("ann1"), lambda: db.relink("ann1")):
        with pytest.raises(UserError, match="'ann1' was removed"):
            call()
    with pytest.raises(UserError, match="only 1 annotator"):  # a removed annotator is not given work
        db.assign(2)


def test_a_removed_users_open_page_is_signed_out(server: Server, sqlite_review: Review) -> None:
    c = Client(server.port)
    assert c.sign_in(sqlite_review.tokens["ann2"]).status == 303
    assert c.get("/").status == 200
    sqlite_review.db.remove_user("ann2")
    reply = c.get("/")
    assert reply.status == 401 and "sign in first" in reply.text
    assert c.post("/signout", {}).status == 401


def test_users_link_and_remove_commands(cli: Callable[..., Any], review_dataset: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "r.sqlite")
    assert cli("review", "init", review_dataset, "--db", db).code == 0
    first = cli("review", "users", "add", "a", "--db", db).out.strip()
    r = cli("review", "users", "link", "a", "--db", db, "--url", "http://example.test:81/")
    assert r.code == 0 and r.out.startswith("a: http://example.test:81/signin?token=")
    store = ReviewDB(db)
    with pytest.raises(ReviewError):
        store.redeem(first.split("token=")[1])
    assert store.redeem(r.out.strip().split("token=")[1])[1].user.name == "a"
    r = cli("review", "users", "remove", "a", "--db", db)
    assert r.code == 0 and r.out.strip() == (
        "a removed: 1 session(s) ended, 0 undecided assignment(s) dropped (run `yanami review assign` to top them up)"
    )
    assert cli("review", "users", "list", "--db", db).out == "a\tannotator\tremoved\n"
    for args, message in (
        (("review", "users", "remove", "a"), "user 'a' was removed"),
        (("review", "users", "link", "zed"), "user 'zed': no such user"),
    ):
        r = cli(*args, "--db", db)
        assert r.code != 0 and message in r.err and len(r.err.strip().splitlines()) == 1, r.err
