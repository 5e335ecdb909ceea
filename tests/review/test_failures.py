"""The database locked, deleted, replaced or dropped under a running server, and replayed requests:
each answered with its status and one line, the server keeps serving, and nothing is lost."""

from __future__ import annotations

import json
import shutil
import sqlite3
import uuid
from pathlib import Path

import pytest

from tests.review.conftest import PG_HOST, PG_PORT, Client, Review, Server, make_review, postgres_reachable
from yanami.review import ReviewDB

TEXT = "turns.0.user.parts.0.text"
JSON = {"Accept": "application/json"}


def _ann1(server: Server, review: Review) -> tuple[Client, str]:
    c = Client(server.port)
    assert c.sign_in(review.tokens["ann1"]).status == 303
    return c, review.db.table()[0]["id"]


def _unavailable(c: Client, path: str, message: str) -> None:
    reply = c.get(path, headers=JSON)
    assert reply.status == 503, reply.text
    error = json.loads(reply.body)["error"]
    assert message in error and "\n" not in error and "Traceback" not in reply.text


def test_a_sqlite_file_deleted_or_replaced_while_serving_is_503_and_nothing_is_lost(
    tmp_path: Path, review_dataset: Path
) -> None:
    path = tmp_path / "review.sqlite"
    review = make_review(str(path), review_dataset)
    with Server(review.db) as server:
        c, did = _ann1(server, review)
        assert c.post(f"/d/{did}/edit", {"path": TEXT, "value": "saved before", "base_version": "0"}).status == 303
        for suffix in ("-wal", "-shm", ""):  # "deleted": gone from its path (kept aside to bring back)
            if Path(f"{path}{suffix}").exists():
                Path(f"{path}{suffix}").rename(tmp_path / f"aside{suffix}")
        _unavailable(c, f"/d/{did}", "review.sqlite: the file is gone")
        late = c.post(f"/d/{did}/edit", {"path": TEXT, "value": "saved while gone", "base_version": "1"}, headers=JSON)
        assert late.status == 503
        assert c.get("/static/review.css").status == 200  # the server keeps running
        shutil.copy(review_dataset / "manifest.json", path)  # another file at the path
        _unavailable(c, "/", "the file was replaced by another one")
        path.unlink()
        for suffix in ("-wal", "-shm", ""):
            if (tmp_path / f"aside{suffix}").exists():
                (tmp_path / f"aside{suffix}").rename(f"{path}{suffix}")
        page = c.get(f"/d/{did}")
        assert page.status == 200 and "saved before" in page.text and "saved while gone" not in page.text
    review.db.close()
    again = ReviewDB(str(path))
    assert [e.after for e in again.edits(did)] == ["saved before"]
    again.close()


def test_a_locked_database_is_503_over_http_and_the_save_can_be_made_after(
    tmp_path: Path, review_dataset: Path
) -> None:
    path = tmp_path / "review.sqlite"
    review = make_review(str(path), review_dataset)
    quick = ReviewDB(str(path), wait_s=0.2)
    with Server(quick) as server:
        c, did = _ann1(server, review)
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            form = {"path": TEXT, "value": "while locked", "base_version": "0"}
            reply = c.post(f"/d/{did}/edit", form, headers=JSON)
            assert reply.status == 503 and json.loads(reply.body)["error"].endswith("database is locked")
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert c.post(f"/d/{did}/edit", form).status == 303
    assert [e.after for e in review.db.edits(did)] == ["while locked"]
    quick.close()
    review.db.close()


def test_a_postgresql_database_dropped_while_serving_is_503_and_the_server_stays_up(review_dataset: Path) -> None:
    if not postgres_reachable():
        pytest.skip("PostgreSQL not reachable on 127.0.0.1:5432")
    import psycopg

    admin = f"postgresql://postgres@{PG_HOST}:{PG_PORT}/test"
    name = f"yanami_review_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        review = make_review(f"postgresql://postgres@{PG_HOST}:{PG_PORT}/{name}", review_dataset)
        with Server(review.db) as server:
            c, did = _ann1(server, review)
            assert c.get(f"/d/{did}").status == 200
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            _unavailable(c, f"/d/{did}", f'database "{name}" does not exist')
            _unavailable(c, "/", f'database "{name}" does not exist')  # again: the server is still up
            assert c.get("/static/review.js").status == 200
            with psycopg.connect(admin, autocommit=True) as conn:  # re-created, empty
                conn.execute(f'CREATE DATABASE "{name}"')
            _unavailable(c, f"/d/{did}", 'relation "instance" does not exist')
            late = c.post(
                f"/d/{did}/edit", {"path": TEXT, "value": "into the new one", "base_version": "0"}, headers=JSON
            )
            assert late.status == 503
            other = make_review(f"postgresql://postgres@{PG_HOST}:{PG_PORT}/{name}", review_dataset)
            _unavailable(c, f"/d/{did}", "replaced by another database while in use")  # a whole other review
            assert other.db.edits() == []
            other.db.close()
        review.db.close()
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_replayed_save_is_applied_once_and_a_replay_after_sign_out_is_refused(
    server: Server, sqlite_review: Review
) -> None:
    c, did = _ann1(server, sqlite_review)
    form = {"path": TEXT, "value": "once", "base_version": "0"}
    assert c.post(f"/d/{did}/edit", form).status == 303
    replay = c.post(f"/d/{did}/edit", form)
    assert replay.status == 409 and sqlite_review.db.dialogue(did)[1] == 1
    assert c.post("/signout", {}).status == 303
    replay = c.post(f"/d/{did}/decision", {"decision": "approve"}, headers=JSON)
    assert replay.status == 401 and json.loads(replay.body) == {
        "error": "sign in first: open the sign-in link an admin gave you"
    }
    assert [e.after for e in sqlite_review.db.edits(did)] == ["once"] and sqlite_review.db.verdicts(did) == {}


def test_a_sqlite_file_changed_in_place_is_503_and_nothing_is_written_into_it(
    tmp_path: Path, review_dataset: Path
) -> None:
    path = tmp_path / "review.sqlite"
    review = make_review(str(path), review_dataset)
    spare = make_review(str(tmp_path / "other.sqlite"), review_dataset)
    spare.db.close()
    with Server(review.db) as server:
        c, did = _ann1(server, review)
        assert c.post(f"/d/{did}/edit", {"path": TEXT, "value": "saved before", "base_version": "0"}).status == 303
        # the edit sits in the write-ahead log, where SQLite would go on reading it from
        assert Path(f"{path}-wal").stat().st_size > 0
        kept = {suffix: Path(f"{path}{suffix}").read_bytes() for suffix in ("", "-wal", "-shm")}
        inode = path.stat().st_ino
        for change, message in (
            (lambda: path.open("r+b").truncate(0), "the file was changed in place"),
            (lambda: path.write_bytes(b"not a database at all " * 500), "the file was changed in place"),
            (lambda: path.write_bytes((tmp_path / "other.sqlite").read_bytes()), "the file was changed in place"),
        ):
            change()
            assert path.stat().st_ino == inode  # changed in place: the same file
            after = {suffix: Path(f"{path}{suffix}").read_bytes() for suffix in ("", "-wal")}
            _unavailable(c, f"/d/{did}", message)
            late = c.post(f"/d/{did}/edit", {"path": TEXT, "value": "written late", "base_version": "1"}, headers=JSON)
            assert late.status == 503 and "Traceback" not in late.text
            assert {suffix: Path(f"{path}{suffix}").read_bytes() for suffix in ("", "-wal")} == after  # nothing written
    review.db.close()
    for suffix, data in kept.items():
        Path(f"{path}{suffix}").write_bytes(data)
    again = ReviewDB(str(path))
    assert [e.after for e in again.edits(did)] == ["saved before"]
    again.close()


def test_nul_and_unstorable_text_is_422_on_both_databases(db_url: str, review_dataset: Path) -> None:
    review = make_review(db_url, review_dataset)
    with Server(review.db) as server:
        c, did = _ann1(server, review)
        check = next(cc["id"] for t in review.db.dialogue(did)[0]["turns"] for cc in t["checks"])
        for path, form in (
            (f"/d/{did}/edit", {"path": TEXT, "value": "a\x00b", "base_version": "0"}),
            (f"/d/{did}/check", {"check_id": check, "verdict": "fix", "comment": "nul \x00 here"}),
            (f"/d/{did}/check", {"check_id": "c\x00", "verdict": "pass"}),
            (f"/d/{did}/decision", {"decision": "approve", "comment": "\x00"}),
        ):
            reply = c.post(path, form, headers=JSON)
            assert reply.status == 422 and "NUL character" in json.loads(reply.body)["error"], (path, reply.text)
        for path in (f"/d/{did}%00", "/d/%00/history", "/image/%00", f"/d/{did}%00/edit"):
            reply = c.get(path, headers=JSON)
            assert reply.status == 404 and "no such page" in reply.text, (path, reply.text)
        reply = c.post(f"/d/{did}%00/edit", {"path": TEXT, "value": "x", "base_version": "0"}, headers=JSON)
        assert reply.status == 404
        assert c.get(f"/d/{did}").status == 200  # still serving
    assert review.db.dialogue(did)[1] == 0 and review.db.verdicts(did) == {}
    review.db.close()
