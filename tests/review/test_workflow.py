"""A lead's workflow over real HTTP: the admin's home, guidelines in Markdown, skip and flag with a
reason, queue filters, the time per item in the status and the export."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.review.conftest import Client, Review, Server, judge_rest
from yanami.review import Decision


def _signed_in(server: Server, review: Review, name: str) -> Client:
    c = Client(server.port)
    assert c.sign_in(review.tokens[name]).status == 303
    return c


def _user(review: Review, name: str):  # type: ignore[no-untyped-def]
    return next(u for u in review.db.users() if u.name == name)


def test_the_admin_lands_on_the_admin_page(server: Server, sqlite_review: Review) -> None:
    boss = _signed_in(server, sqlite_review, "boss")
    home = boss.get("/")
    assert home.status == 303 and home.headers["location"] == "/admin"
    assert _signed_in(server, sqlite_review, "ann1").get("/").status == 200  # an annotator's home is the queue


def test_guidelines_written_in_markdown_are_shown_safely(
    server: Server, sqlite_review: Review, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    source = tmp_path / "guide.md"
    source.write_text(
        "# How we review\n\nA check *passes* when the picture shows it.\n\n"
        "<script>alert(1)</script>\n\n[a trap](javascript:alert(2)) and [the paper](https://example.org/p)\n",
        encoding="utf-8",
    )
    db_path = sqlite_review.db.url.removeprefix("sqlite:///")
    result = cli("review", "guidelines", source, "--db", db_path)
    assert result.code == 0 and result.out.startswith("guidelines version 1")
    ann1 = _signed_in(server, sqlite_review, "ann1")
    page = ann1.get("/guidelines").text
    assert "<h1>How we review</h1>" in page and "<em>passes</em>" in page
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)" in page
    assert 'href="javascript:' not in page and 'href="https://example.org/p"' in page
    assert 'name="text"' not in page  # only the lead writes them
    assert ann1.post("/admin/guidelines", {"text": "mine"}).status == 403
    boss = _signed_in(server, sqlite_review, "boss")
    assert boss.post("/admin/guidelines", {"text": "## Version two"}).status == 303
    assert "<h2>Version two</h2>" in ann1.get("/guidelines").text and "version 2" in ann1.get("/guidelines").text
    assert cli("review", "guidelines", "--db", db_path).out.strip() == "## Version two"
    missing = cli("review", "guidelines", tmp_path / "nope.md", "--db", db_path)
    assert missing.code == 2 and "nope.md: cannot be read (No such file or directory)" in missing.err
    binary = tmp_path / "guide.bin"
    binary.write_bytes(b"\xff\xfe\x00")
    assert "guide.bin: not UTF-8 text" in cli("review", "guidelines", binary, "--db", db_path).err
    assert cli("review", "guidelines", tmp_path, "--db", db_path).code == 2  # a directory


def test_skip_and_flag_need_a_reason_and_the_filters_find_them(server: Server, sqlite_review: Review) -> None:
    db = sqlite_review.db
    ann1 = _signed_in(server, sqlite_review, "ann1")
    mine = db.queue(_user(sqlite_review, "ann1"))
    did = mine[0]["id"]
    check = next(c["id"] for t in db.dialogue(did)[0]["turns"] for c in t["checks"])
    json_ = {"Accept": "application/json"}
    bare = ann1.post(f"/d/{did}/check", {"check_id": check, "verdict": "skip"}, headers=json_)
    assert bare.status == 422 and "a skip needs a comment" in json.loads(bare.body)["error"]
    skipped = ann1.post(f"/d/{did}/check", {"check_id": check, "verdict": "skip", "comment": "too dark"}, headers=json_)
    assert skipped.status == 200 and json.loads(skipped.body) == {"check": check, "verdict": "skip"}
    assert ann1.post(f"/d/{did}/flag", {"reason": "  "}).status == 422
    assert ann1.post(f"/d/{did}/flag", {"reason": "the second picture is cut off"}).status == 303
    assert "the second picture is cut off" in ann1.get(f"/d/{did}").text
    flagged = ann1.get("/?status=flagged").text
    assert did in flagged and all(i["id"] not in flagged for i in mine[1:])
    scenario = mine[-1]["group"]
    only = ann1.get(f"/?scenario={scenario}").text
    assert all((i["id"] in only) == (i["group"] == scenario) for i in mine)
    assert ann1.get("/?status=bogus").status == 422
    # the other annotator does not see the flag before deciding (blind); the admin does, with the reason
    ann2 = _signed_in(server, sqlite_review, "ann2")
    if did in [i["id"] for i in db.queue(_user(sqlite_review, "ann2"))]:
        assert "cut off" not in ann2.get(f"/d/{did}").text
    boss = _signed_in(server, sqlite_review, "boss")
    admin = boss.get("/admin?status=flagged").text
    listed = admin.split('id="all"')[1]
    assert did in listed and "ann1: the second picture is cut off" in html.unescape(listed)
    assert all(i["id"] not in listed for i in mine[1:])
    assert boss.get("/admin?status=nonsense").status == 422
    assert ann1.post(f"/d/{did}/flag", {"unflag": "1"}).status == 303
    assert did not in boss.get("/admin?status=flagged").text.split('id="all"')[1]


def test_the_time_per_item_reaches_the_status_and_the_export(
    server: Server, sqlite_review: Review, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    from yanami.review._db import T

    db = sqlite_review.db
    ann1 = _signed_in(server, sqlite_review, "ann1")
    did = db.queue(_user(sqlite_review, "ann1"))[0]["id"]
    assert ann1.get(f"/d/{did}").status == 200  # first opened now
    with db.begin() as conn:  # as if it had been opened 95 seconds ago
        it = T["item_times"]
        conn.execute(it.update().values(opened=it.c.opened - 95))
    judge_rest(db, _user(sqlite_review, "ann1"), did)
    assert ann1.post(f"/d/{did}/decision", {"decision": "approve"}).status == 303
    row = next(r for r in db.table() if r["id"] == did)
    assert 95 <= row["seconds"]["ann1"] < 120
    db_path = sqlite_review.db.url.removeprefix("sqlite:///")
    status = cli("review", "status", "--db", db_path).out
    assert re.search(r"ann1: 1/\d+ decided, median 1 min 3\d s per dialogue", status), status
    boss = _signed_in(server, sqlite_review, "boss")
    assert re.search(r"ann1: 1 min 3\d s", boss.get("/admin").text)
    db.adjudicate(_user(sqlite_review, "boss"), did, Decision.APPROVE, "one decision is enough here")
    out = tmp_path / "bench"
    assert cli("review", "export", "--db", db_path, "--out", out).code == 0
    from yanami.store import Dataset

    exported = {d.id: d for d in Dataset(out)}
    assert 95 <= exported[did].meta.params["review"]["seconds"]["ann1"] < 120
