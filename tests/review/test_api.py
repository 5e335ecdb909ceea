"""The web app over real HTTP (uvicorn on 127.0.0.1): sign-in, CSRF, roles, blindness, conflicts,
and each bad input answered with its status and one message."""

from __future__ import annotations

import html
import re

from tests.review.conftest import Client, Review, Server, judge_rest

TEXT = "turns.0.user.parts.0.text"


def _first_ids(review: Review) -> tuple[str, str]:
    """A dialogue both annotators have, and its first check."""
    did = next(r["id"] for r in review.db.table() if r["assigned"] == ["ann1", "ann2"])
    data, _ = review.db.dialogue(did)
    return did, next(c["id"] for t in data["turns"] for c in t["checks"])


def _user(review: Review, name: str):  # type: ignore[no-untyped-def]
    return next(u for u in review.db.users() if u.name == name)


def _signed_in(server: Server, review: Review, name: str) -> Client:
    c = Client(server.port)
    assert c.sign_in(review.tokens[name]).status == 303
    return c


def test_every_page_and_image_needs_a_session(client: Client, sqlite_review: Review) -> None:
    did, _ = _first_ids(sqlite_review)
    sha = sqlite_review.db.dialogue(did)[0]["turns"][0]["user"]["parts"][1]["sha256"]
    for path in ("/", f"/d/{did}", f"/image/{sha}", "/admin", f"/d/{did}/history"):
        reply = client.get(path)
        assert reply.status == 401, path
        assert "sign in first" in reply.text
    assert client.get("/", headers={"Accept": "application/json"}).text == (
        '{"error":"sign in first: open the sign-in link an admin gave you"}'
    )
    forged = Client(client.port, cookie="forged-session")
    assert forged.get("/").status == 401


def test_a_sign_in_link_works_once_and_sets_a_strict_http_only_cookie(server: Server, sqlite_review: Review) -> None:
    c = Client(server.port)
    form = c.get(f"/signin?token={sqlite_review.tokens['ann1']}")
    assert form.status == 200 and sqlite_review.tokens["ann1"] in form.text  # GET spends nothing
    assert c.sign_in(sqlite_review.tokens["ann1"]).status == 303
    cookie = next(k for k in reversed(c.set_cookies) if k.startswith("yanami_review="))
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert all("HttpOnly" in k and "SameSite=strict" in k for k in c.set_cookies)
    assert c.get("/").status == 200
    replay = Client(server.port).sign_in(sqlite_review.tokens["ann1"])
    assert replay.status == 401 and "not valid or was already used" in replay.text


def test_sign_in_refuses_another_site_and_a_missing_token_and_ends_the_earlier_session(
    server: Server, sqlite_review: Review
) -> None:
    token = sqlite_review.tokens["ann2"]
    c = Client(server.port)
    form_token = c.signin_form(token)
    # login CSRF: a page on another port posts the attacker's link into the victim's browser
    for headers in ({"Origin": "http://127.0.0.1:9"}, {"Sec-Fetch-Site": "cross-site"}):
        forged = c.request("POST", "/signin", {"token": token, "signin_csrf": form_token}, headers=headers)
        assert forged.status == 403 and "another site" in forged.text
    assert c.request("POST", "/signin", {"token": token}).status == 403  # no form token
    other = Client(server.port)
    other.signin_form("another-link")  # a sign-in cookie of its own: the token of another does not fit it
    assert other.request("POST", "/signin", {"token": token, "signin_csrf": form_token}).status == 403
    assert c.sign_in(token).status == 303  # nothing above spent the link
    first = c.cookie
    assert c.get("/").status == 200
    again = Client(server.port)
    assert again.sign_in(sqlite_review.db.relink("ann2")).status == 303
    assert again.get("/").status == 200
    assert c.get("/").status == 401 and first != again.cookie  # signing in again ends the earlier session


def test_changes_need_the_csrf_token_and_the_same_origin(server: Server, sqlite_review: Review) -> None:
    did, check = _first_ids(sqlite_review)
    c = _signed_in(server, sqlite_review, "ann1")
    form = {"check_id": check, "verdict": "pass"}
    missing = c.post(f"/d/{did}/check", form, csrf=False)
    assert missing.status == 403 and "missing or invalid CSRF token" in missing.text
    wrong = c.post(f"/d/{did}/check", {"csrf": "x" * 43, **form}, csrf=False)
    assert wrong.status == 403
    foreign = c.post(f"/d/{did}/check", form, headers={"Origin": "http://evil.example"})
    assert foreign.status == 403 and "another site" in foreign.text
    other = _signed_in(server, sqlite_review, "ann2")  # another session's token is not this one's
    assert c.post(f"/d/{did}/check", {"csrf": other.csrf or "", **form}, csrf=False).status == 403
    assert sqlite_review.db.verdicts(did) == {}
    assert c.post(f"/d/{did}/check", form).status == 303
    assert sqlite_review.db.verdicts(did)["ann1"]["checks"] == {check: ("pass", "")}


def test_an_annotator_reaches_only_their_assignments(server: Server, sqlite_review: Review) -> None:
    db = sqlite_review.db
    mine = {r["id"] for r in db.table() if "ann1" in r["assigned"]}
    db.add_user("ann3", __import__("yanami.review", fromlist=["Role"]).Role.ANNOTATOR)
    # ann1 and ann2 hold every dialogue (2 per item); make one for ann3 alone
    rows = db.table()
    assert {r["id"] for r in rows} == mine
    from yanami.review._db import T

    did = rows[-1]["id"]
    with db.begin() as conn:
        conn.execute(T["assignments"].delete().where(T["assignments"].c.dialogue_id == did))
        uid = next(u.id for u in db.users() if u.name == "ann3")
        conn.execute(T["assignments"].insert(), {"user_id": uid, "dialogue_id": did})
    c = _signed_in(server, sqlite_review, "ann1")
    page = c.get(f"/d/{did}")
    assert page.status == 403 and f"dialogue {did}: not assigned to you" in page.text
    assert c.post(f"/d/{did}/decision", {"decision": "approve"}).status == 403
    assert c.post(f"/d/{did}/edit", {"path": TEXT, "value": "x", "base_version": "0"}).status == 403
    assert c.get("/d/no-such-dialogue").status == 404
    assert c.get("/admin").status == 403
    # images: only those of one's own dialogues, by hash only
    theirs = {
        p["sha256"]
        for t in db.dialogue(did)[0]["turns"]
        for m in ("user", "assistant")
        for p in t[m]["parts"]
        if p["type"] == "image"
    }
    own = {
        p["sha256"]
        for r in db.table()
        if r["id"] != did
        for t in db.dialogue(r["id"])[0]["turns"]
        for m in ("user", "assistant")
        for p in t[m]["parts"]
        if p["type"] == "image"
    }
    only_theirs = sorted(theirs - own)
    assert only_theirs
    assert c.get(f"/image/{only_theirs[0]}").status == 404
    image = c.get(f"/image/{sorted(own)[0]}")
    assert image.status == 200 and image.body.startswith(b"\x89PNG") and image.headers["content-type"] == "image/png"
    assert c.get("/image/" + "0" * 64).status == 404
    assert c.get("/image/..%2f..%2fmanifest.json").status == 404
    boss = _signed_in(server, sqlite_review, "boss")
    assert boss.get(f"/image/{only_theirs[0]}").status == 200 and boss.get("/admin").status == 200


def test_reviewers_are_blind_to_each_other_until_they_decide(server: Server, sqlite_review: Review) -> None:
    did, check = _first_ids(sqlite_review)
    a, b = _signed_in(server, sqlite_review, "ann1"), _signed_in(server, sqlite_review, "ann2")
    a.post(f"/d/{did}/check", {"check_id": check, "verdict": "fix", "comment": "ANN1-SECRET-NOTE"})
    judge_rest(sqlite_review.db, _user(sqlite_review, "ann1"), did)
    assert a.post(f"/d/{did}/decision", {"decision": "reject", "comment": "ANN1-REASON"}).status == 303
    before = b.get(f"/d/{did}").text
    assert "ANN1-SECRET-NOTE" not in before and "ANN1-REASON" not in before and "ann1:" not in before
    assert "shown once you have submitted your decision" in before
    # a throwaway decision to peek is refused while checks are unjudged, and final once made
    early = b.post(f"/d/{did}/decision", {"decision": "approve"})
    assert early.status == 422 and "not judged yet" in early.text
    b.post(f"/d/{did}/check", {"check_id": check, "verdict": "pass"})
    judge_rest(sqlite_review.db, _user(sqlite_review, "ann2"), did)
    assert b.post(f"/d/{did}/decision", {"decision": "approve"}).status == 303
    after = b.get(f"/d/{did}").text
    assert "ANN1-SECRET-NOTE" in after and "ann1: reject — ANN1-REASON" in after
    # having seen ann1's verdicts, ann2 can change nothing: the admin adjudicates
    for path, form in (
        (f"/d/{did}/decision", {"decision": "reject"}),
        (f"/d/{did}/check", {"check_id": check, "verdict": "fix", "comment": "as ann1 says"}),
    ):
        refused = b.post(path, form)
        assert refused.status == 409 and "is final" in refused.text
    mine = sqlite_review.db.verdicts(did)["ann2"]
    assert mine["decision"] == "approve" and mine["checks"][check] == ("pass", "")


def test_a_stale_save_gets_409_with_both_versions(server: Server, sqlite_review: Review) -> None:
    did, _ = _first_ids(sqlite_review)
    a, b = _signed_in(server, sqlite_review, "ann1"), _signed_in(server, sqlite_review, "ann2")
    assert a.post(f"/d/{did}/edit", {"path": TEXT, "value": "ann1's words", "base_version": "0"}).status == 303
    stale = b.post(f"/d/{did}/edit", {"path": TEXT, "value": "ann2's words", "base_version": "0"})
    assert stale.status == 409
    page = html.unescape(stale.text)
    assert "ann1 changed this text first" in page and "ann1's words" in page and "ann2's words" in page
    assert re.search(r'name="base_version" value="1"', stale.text)  # saving again builds on the current version
    data, version = sqlite_review.db.dialogue(did)
    assert version == 1 and data["turns"][0]["user"]["parts"][0]["text"] == "ann1's words"
    again = b.post(f"/d/{did}/edit", {"path": TEXT, "value": "ann2's words", "base_version": "1"})
    assert again.status == 303 and sqlite_review.db.dialogue(did)[1] == 2
    history = a.get(f"/d/{did}/history").text
    assert history.count('<tr id="v') == 2 and "ann2" in history and "<del>" in history


def test_bad_input_gets_its_status_and_one_message(server: Server, sqlite_review: Review) -> None:
    did, check = _first_ids(sqlite_review)
    a = _signed_in(server, sqlite_review, "ann1")
    cases = [
        ({"path": TEXT, "value": "x" * 20_001, "base_version": "0"}, 413, "at most 20000"),
        ({"path": TEXT, "value": "x", "base_version": "zero"}, 422, "is not a version number"),
        ({"path": "meta.seed", "value": "1", "base_version": "0"}, 422, "not an editable text"),
    ]
    for form, status, message in cases:
        reply = a.post(f"/d/{did}/edit", form)
        assert reply.status == status and message in html.unescape(reply.text), (form, reply.text[-500:])
    huge = a.post(f"/d/{did}/edit", {"path": TEXT, "value": "x" * 1_100_000, "base_version": "0"})
    assert huge.status == 413 and "request body over" in huge.text
    assert a.post(f"/d/{did}/check", {"check_id": "nope", "verdict": "pass"}).status == 422
    assert a.post(f"/d/{did}/check", {"check_id": check, "verdict": "maybe"}).status == 422
    assert sqlite_review.db.dialogue(did)[1] == 0 and sqlite_review.db.verdicts(did) == {}


def test_script_laden_text_is_escaped_everywhere(server: Server, sqlite_review: Review) -> None:
    did, check = _first_ids(sqlite_review)
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    a = _signed_in(server, sqlite_review, "ann1")
    assert a.post(f"/d/{did}/edit", {"path": TEXT, "value": evil, "base_version": "0"}).status == 303
    a.post(f"/d/{did}/check", {"check_id": check, "verdict": "fix", "comment": evil})
    a.post(f"/d/{did}/decision", {"decision": "reject", "comment": evil})
    boss = _signed_in(server, sqlite_review, "boss")
    for client, path in ((a, f"/d/{did}"), (a, f"/d/{did}/history"), (boss, f"/admin/d/{did}"), (boss, f"/d/{did}")):
        page = client.get(path)
        assert page.status == 200
        assert "<script>alert" not in page.text and "<img src=x" not in page.text, path
        assert "&lt;script&gt;alert" in page.text, path
        assert "script-src 'self'" in page.headers["content-security-policy"]


def test_the_admin_sees_disagreements_worst_first_and_adjudicates(server: Server, sqlite_review: Review) -> None:
    db = sqlite_review.db
    ids = [r["id"] for r in db.table()]
    a, b = _signed_in(server, sqlite_review, "ann1"), _signed_in(server, sqlite_review, "ann2")
    first = [next(c["id"] for t in db.dialogue(d)[0]["turns"] for c in t["checks"]) for d in ids[:2]]
    # ids[0]: both approve, they split on one check; ids[1]: they split on the decision
    a.post(f"/d/{ids[0]}/check", {"check_id": first[0], "verdict": "pass"})
    b.post(f"/d/{ids[0]}/check", {"check_id": first[0], "verdict": "fail"})
    a.post(f"/d/{ids[1]}/check", {"check_id": first[1], "verdict": "fail"})
    a.post(f"/d/{ids[1]}/check", {"check_id": first[1], "verdict": "pass"})  # changed before deciding
    b.post(f"/d/{ids[1]}/check", {"check_id": first[1], "verdict": "fail"})
    for client, name, did, decision in (
        (a, "ann1", ids[0], "approve"),
        (b, "ann2", ids[0], "approve"),
        (a, "ann1", ids[1], "approve"),
        (b, "ann2", ids[1], "reject"),
    ):
        judge_rest(db, _user(sqlite_review, name), did)
        assert client.post(f"/d/{did}/decision", {"decision": decision, "comment": f"{name} on {did}"}).status == 303
    boss = _signed_in(server, sqlite_review, "boss")
    page = boss.get("/admin").text
    disputed = page.split('id="disputed"')[1].split("</table>")[0]
    assert disputed.index(ids[1]) < disputed.index(ids[0])  # a split decision before a split check
    assert "Fleiss" in page and "Krippendorff" in page
    side = boss.get(f"/admin/d/{ids[1]}").text
    assert "ann1" in side and "ann2" in side and "reject" in side
    given = side.split('id="verdict-history"')[1].split("</table>")[0]
    assert "<del>fail</del>" in given and "ann2 on " + ids[1] in given
    assert a.post(f"/admin/d/{ids[1]}/adjudicate", {"decision": "approve"}).status == 403
    assert boss.post(f"/admin/d/{ids[1]}/adjudicate", {"decision": "approve", "comment": "ok"}).status == 303
    assert next(r for r in db.table() if r["id"] == ids[1])["final"] == "approve"
    after = boss.get("/admin").text.split('id="disputed"')[1].split("</table>")[0]
    row = re.search(rf'href="/admin/d/{ids[1]}".*?</tr>', after, re.S)
    assert row is not None and "1 split check(s)" in row.group(0)  # the decision is settled, the check waits
    assert boss.post(f"/admin/d/{ids[1]}/check", {"check_id": first[1], "verdict": "fail"}).status == 303
    after = boss.get("/admin").text.split('id="disputed"')[1].split("</table>")[0]
    assert ids[1] not in after and ids[0] in after  # the adjudicated item leaves the list
    assert boss.post(f"/admin/d/{ids[0]}/check", {"check_id": first[0], "verdict": "pass"}).status == 303
    assert a.post(f"/admin/d/{ids[0]}/check", {"check_id": first[0], "verdict": "pass"}).status == 403
    assert boss.post(f"/admin/d/{ids[0]}/check", {"check_id": first[0], "verdict": "fix"}).status == 422
    assert ids[0] not in boss.get("/admin").text.split('id="disputed"')[1].split("</table>")[0]


def test_options_letters_and_revert_over_http(server: Server, sqlite_review: Review) -> None:
    did, _ = _first_ids(sqlite_review)
    a, b = _signed_in(server, sqlite_review, "ann1"), _signed_in(server, sqlite_review, "ann2")
    data, _ = sqlite_review.db.dialogue(did)
    k, q = next((k, q) for k, q in enumerate(data["questions"]) if len(q["choices"]) == 4)
    page = a.get(f"/d/{did}").text
    assert f'name="path" value="questions.{k}.answer_letters"' in page
    assert f'name="path" value="questions.{k}.choices"' in page
    new = next(x for x in "ABCD" if x not in q["answer_letters"])
    letters = f"questions.{k}.answer_letters"
    assert a.post(f"/d/{did}/edit", {"path": letters, "value": new, "base_version": "0"}).status == 303
    bad = a.post(
        f"/d/{did}/edit", {"path": letters, "value": "Z", "base_version": "1"}, headers={"Accept": "application/json"}
    )
    assert (
        bad.status == 422
        and bad.text == f"{{\"error\":\"field '{letters}': 'Z' is not option letters (write e.g. B or A, C)\"}}"
    )
    history = b.get(f"/d/{did}/history").text
    assert 'name="to_version" value="0"' in history and 'name="to_version" value="1"' not in history
    assert b.post(f"/d/{did}/revert", {"base_version": "1", "to_version": "0"}).status == 303
    assert sqlite_review.db.dialogue(did) == (data, 2)
    stale = a.post(f"/d/{did}/revert", {"base_version": "1", "to_version": "0"})
    assert stale.status == 409 and "ann2 changed this dialogue first" in html.unescape(stale.text)
    assert "a revert to version 0" in stale.text
    # the page's button asks for the same revert on the current version: it works (no 422)
    form = dict(re.findall(r'name="(base_version|to_version)" value="([^"]*)"', stale.text))
    assert form == {"base_version": "2", "to_version": "0"}
    assert a.post(f"/d/{did}/revert", form).status == 303  # already version 0's content: nothing new
    assert a.post(f"/d/{did}/revert", {"base_version": "2", "to_version": "x"}).status == 422
    assert "revert to version 0" in a.get(f"/d/{did}/history").text
    assert a.post(f"/d/{did}/revert", {"base_version": "2", "to_version": "0"}, csrf=False).status == 403
    assert sqlite_review.db.dialogue(did)[1] == 2
