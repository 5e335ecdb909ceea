"""The review app in a real browser: Debian's Chromium driven by Playwright (never a downloaded
browser). Two annotators and an admin review, edit, collide, adjudicate and export.

``YANAMI_DOCS_SCREENSHOTS=1`` also saves the screenshots into docs/ for docs/review.md."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.review.conftest import Review, Server, judge_rest

pytest.importorskip("playwright.sync_api", reason="playwright not installed")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip("chromium not installed (apt-get install -y chromium)", allow_module_level=True)

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_two_annotators_and_an_admin_review_collide_adjudicate_and_export(
    server: Server, sqlite_review: Review, tmp_path: Path, cli: Callable[..., object]
) -> None:
    from playwright.sync_api import expect, sync_playwright

    db = sqlite_review.db
    did = next(r["id"] for r in db.table() if r["group"] == "editing")
    shots = {
        "dialogue": tmp_path / "review-dialogue.png",
        "conflict": tmp_path / "review-conflict.png",
        "admin": tmp_path / "review-admin.png",
    }
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        errors: list[str] = []

        def person(name: str):  # type: ignore[no-untyped-def]
            page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
            page.on("pageerror", lambda e: errors.append(f"{name}: {e}"))
            page.on("console", lambda m: errors.append(f"{name}: {m.text}") if m.type == "error" else None)
            page.goto(f"{server.url}/signin?token={sqlite_review.tokens[name]}")
            page.click("#signin")
            expect(page.locator("h1")).to_have_text("Review progress" if name == "boss" else "Your queue")
            return page

        ann1, ann2, boss = person("ann1"), person("ann2"), person("boss")
        expect(ann1.locator(".progress")).to_contain_text("0 of 4 dialogues decided")

        ann2.click(f"text={did}")  # ann2 opens the dialogue before ann1 edits it
        ann1.click(f"text={did}")
        expect(ann1.locator("section.turn")).to_have_count(len(db.dialogue(did)[0]["turns"]))
        sizes = ann1.evaluate(  # every image loads (lazy ones made eager), each next to the one it edits
            "Promise.all(Array.from(document.images).map(i => { i.loading = 'eager';"
            " return i.decode().then(() => i.naturalWidth, () => 0); }))"
        )
        assert len(sizes) >= 6 and all(w > 0 for w in sizes)
        # the common path by keyboard: pass the focused check, then the next
        ann1.keyboard.press("p")
        expect(ann1.locator("li.check.judged.pass")).to_have_count(1)
        ann1.keyboard.press("p")
        expect(ann1.locator("li.check.judged.pass")).to_have_count(2)
        # fix with a comment: x focuses the comment, Enter submits it as a fix
        ann1.keyboard.press("x")
        ann1.keyboard.type("the cube should be red")
        ann1.keyboard.press("Enter")
        expect(ann1.locator("li.check.judged.fix")).to_have_count(1)
        # edit the first user text
        first = ann1.locator("section.turn").first.locator("details.edit").first
        first.locator("summary").click()
        first.locator("textarea").fill("Here is my first picture, edited by ann1.")
        first.locator("button.save").click()
        expect(ann1.locator("h1 small")).to_contain_text("version 1")
        ann1.screenshot(path=str(shots["dialogue"]))

        # ann2 saves the same text on the version they loaded: 409, both versions shown
        other = ann2.locator("section.turn").first.locator("details.edit").first
        other.locator("summary").click()
        other.locator("textarea").fill("Here is my first picture, as ann2 would put it.")
        with ann2.expect_response(lambda r: r.url.endswith("/edit")) as saved:
            other.locator("button.save").click()
        assert saved.value.status == 409
        expect(ann2.locator("#conflict")).to_contain_text("ann1 changed this text first")
        expect(ann2.locator("#current")).to_have_text("Here is my first picture, edited by ann1.")
        expect(ann2.locator("#yours")).to_have_text("Here is my first picture, as ann2 would put it.")
        ann2.screenshot(path=str(shots["conflict"]), full_page=True)
        ann2.click("text=keep theirs and go back")

        # decisions need every check judged: the rest are judged here, then ann1 approves by key
        expect(ann2.locator(".blind")).to_be_visible()
        expect(ann1.locator("body[data-pending='0']")).to_have_count(1)
        users = {u.name: u for u in db.users()}
        for name in ("ann1", "ann2"):
            judge_rest(db, users[name], did)
        ann1.reload()
        ann1.keyboard.press("a")
        expect(ann1.locator("#my-decision")).to_have_text("approve")
        ann2.reload()
        ann2.click("#decision button[value=reject]")
        expect(ann2.locator("#others")).to_contain_text("ann1: approve")

        # the admin adjudicates the disagreement
        boss.goto(f"{server.url}/admin")
        expect(boss.locator("#disputed")).to_contain_text(did)
        expect(boss.locator("#progress")).to_contain_text("ann1")
        boss.screenshot(path=str(shots["admin"]), full_page=True)
        boss.click(f"#disputed >> text={did}")
        expect(boss.locator("#sidebyside")).to_contain_text("reject")
        expect(boss.locator("tr.split")).to_have_count(1)  # ann1's fix against ann2's pass, highlighted
        expect(boss.locator("tr.split img.thumb")).not_to_have_count(0)  # with the turn's picture
        boss.click("form.adjudicate button[value=approve]")
        expect(boss.locator("#disputed")).to_contain_text(did)  # the split check still waits
        boss.click(f"#disputed >> text={did}")
        boss.click("tr.split form.adjudicate-check button[value=pass]")
        boss.goto(f"{server.url}/admin")
        expect(boss.locator("#disputed")).not_to_contain_text(did)
        expect(boss.locator("#settled")).to_contain_text(did)
        browser.close()
    # the one error a browser logs is the 409 it was meant to get
    assert [e for e in errors if "409 (Conflict)" not in e] == [], errors
    assert sum("409 (Conflict)" in e for e in errors) == 1

    out = tmp_path / "bench"
    result = cli("review", "export", "--db", db.url.removeprefix("sqlite:///"), "--out", out)
    assert result.code == 0, result  # type: ignore[attr-defined]
    assert cli("validate", out).code == 0  # type: ignore[attr-defined]
    from yanami.store import Dataset

    [exported] = list(Dataset(out))
    assert exported.id == did and exported.turns[0].user.text() == "Here is my first picture, edited by ann1."
    assert exported.meta.params["review"]["adjudicated"] == "approve"
    for shot in shots.values():
        assert shot.read_bytes().startswith(b"\x89PNG")
        if os.environ.get("YANAMI_DOCS_SCREENSHOTS") == "1":
            shutil.copyfile(shot, DOCS / shot.name)


def test_forty_keys_on_a_slow_server_are_forty_verdicts_in_order(sqlite_review: Review) -> None:
    """Each verdict is saved without a reload, in order: keys pressed faster than the server answers
    are neither lost nor applied to the wrong check."""
    from playwright.sync_api import expect, sync_playwright

    db = sqlite_review.db
    did = max(db.table(), key=lambda r: sum(len(t["checks"]) for t in db.dialogue(r["id"])[0]["turns"]))["id"]
    ann1 = next(u for u in db.users() if u.name == "ann1")
    assert ann1.name in next(r for r in db.table() if r["id"] == did)["assigned"]  # the fixture gives ann1 all
    checks = [c["id"] for t in db.dialogue(did)[0]["turns"] for c in t["checks"]]
    assert len(checks) >= 40
    keys = ["f" if k % 3 == 2 else "p" for k in range(40)]
    with Server(db, delay_s=0.5) as slow, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_context().new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{slow.url}/signin?token={sqlite_review.tokens['ann1']}")
        page.click("#signin")
        page.goto(f"{slow.url}/d/{did}")
        expect(page.locator("li.check.focus")).to_have_count(1)
        for key in keys:
            page.keyboard.press(key)
            page.wait_for_timeout(100)
        expect(page.locator("li.check.judged")).to_have_count(40)  # shown at once, before the server answers
        expect(page.locator("body[data-pending='0']")).to_have_count(1, timeout=60_000)
        browser.close()
    assert errors == []
    mine = db.verdicts(did)["ann1"]["checks"]
    expected = {cid: ("fail" if key == "f" else "pass") for cid, key in zip(checks, keys, strict=False)}
    assert {cid: v for cid, (v, _) in mine.items()} == expected
    given = [h for h in db.verdict_history(did) if h["user"] == "ann1"]
    assert [h["check"] for h in given] == checks[:40]  # one request per key, in the order pressed
