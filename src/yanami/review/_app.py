"""The review web app: server-rendered pages (autoescaped Jinja2), no CDN, no front-end build.

Security model: every page and image needs a session; a session starts by spending a one-time
sign-in token (POST, so a link preview cannot spend it) and lives in an HttpOnly, SameSite=Strict
cookie; every POST carries the session's CSRF token (and a foreign ``Origin`` is refused);
roles and assignments are checked here on the server; an edit names the version it was made on
and a stale one is answered 409 with both texts; images are served by content hash only, and
an annotator only gets images of their own dialogues.
"""

from __future__ import annotations

import difflib
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from starlette.datastructures import FormData

from yanami.review._annotators import agreement, fmt
from yanami.review._db import (
    DECISION_LABELS,
    REVERT,
    Conflict,
    Decision,
    ReviewDB,
    ReviewError,
    Role,
    Session,
    Unavailable,
    Verdict,
    check_text,
    median_seconds,
    seconds_text,
    to_adjudicate,
)

COOKIE = "yanami_review"
SIGNIN_COOKIE = "yanami_signin"
"""A random value set by the sign-in page; its form carries an HMAC of it (login CSRF)."""
MAX_BODY = 1_000_000
"""The largest request body accepted, in bytes (a text field is further limited to `MAX_TEXT`)."""
STATIC = Path(__file__).parent / "static"
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; img-src 'self'; style-src 'self'; script-src 'self'; connect-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
_MEDIA = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}


def _env() -> Environment:
    env = Environment(
        loader=PackageLoader("yanami.review", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
    )
    env.globals["DECISION_LABELS"] = {d.value: label for d, label in DECISION_LABELS.items()}
    env.filters["fmt"] = fmt
    env.filters["field_words"] = field_words
    env.filters["seconds"] = seconds_text
    return env


def _diff(before: str, after: str) -> list[tuple[str, str]]:
    """A word diff: (op, text) with op ``=``, ``-`` or ``+``, for the templates to mark up."""
    a, b = before.split(" "), after.split(" ")
    out: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            out.append(("=", " ".join(a[i1:i2])))
        else:
            if i2 > i1:
                out.append(("-", " ".join(a[i1:i2])))
            if j2 > j1:
                out.append(("+", " ".join(b[j1:j2])))
    return out


def _letter(i: int) -> str:
    return "ABCDEFG"[i]


def field_words(path: str) -> str:
    """An editable field's path in words: ``turns.0.user.parts.0.text`` is "turn 1, the user's text"."""
    m = re.fullmatch(r"turns\.(\d+)\.(user|assistant)\.parts\.(\d+)\.text", path)
    if m:
        part = f" (part {int(m[3]) + 1})" if m[3] != "0" else ""
        return f"turn {int(m[1]) + 1}, the {m[2]}'s text{part}"
    m = re.fullmatch(r"turns\.(\d+)\.checks\.(\d+)\.text", path)
    if m:
        return f"turn {int(m[1]) + 1}, check {int(m[2]) + 1}"
    m = re.fullmatch(r"questions\.(\d+)\.(text|answer|answer_letters|choices)(?:\.(\d+))?", path)
    if m:
        what = {"text": "the question", "answer": "the answer", "answer_letters": "the correct letter(s)"}.get(
            m[2], f"option {_letter(int(m[3]))}" if m[3] is not None else "the options"
        )
        return f"question {int(m[1]) + 1}, {what}"
    m = re.fullmatch(r"revert:(\d+)", path)
    if m:
        return f"a revert to version {m[1]}"
    return path


def _view(data: dict[str, Any]) -> dict[str, Any]:
    """What the dialogue page shows: turns with the image each assistant image edits beside it."""
    turns = []
    last_image: str | None = None
    for t in data["turns"]:
        sides = {}
        for side in ("user", "assistant"):
            parts = []
            for j, p in enumerate(t[side]["parts"]):
                if p["type"] == "text":
                    parts.append(
                        {"type": "text", "text": p["text"], "path": f"turns.{t['index']}.{side}.parts.{j}.text"}
                    )
                else:
                    parts.append({**p, "before": last_image if side == "assistant" else None})
                    last_image = p["sha256"]
            sides[side] = parts
        turns.append(
            {
                "index": t["index"],
                "user": sides["user"],
                "assistant": sides["assistant"],
                "capabilities": t.get("capabilities", []),
                "checks": [{**c, "path": f"turns.{t['index']}.checks.{k}.text"} for k, c in enumerate(t["checks"])],
                "state": json.dumps(t.get("hidden", {}).get("state"), indent=1, ensure_ascii=False),
                "intent": json.dumps(t.get("hidden", {}).get("intent"), indent=1, ensure_ascii=False),
            }
        )
    questions = [
        {
            **q,
            "path": f"questions.{k}",
            "options": [(_letter(i), c) for i, c in enumerate(q.get("choices", []))],
        }
        for k, q in enumerate(data.get("questions", []))
    ]
    return {"turns": turns, "questions": questions}


STATUSES = ("", "open", "decided", "flagged")
"""The annotator's queue filters ("" shows everything)."""
ADMIN_STATUSES = ("", "undecided", "approve", "refine", "reject", "waiting", "flagged")
"""The admin's filters of every dialogue: its final decision, what waits for the admin, the flagged."""


def _known(status: str, allowed: tuple[str, ...]) -> None:
    """422 for a status filter that is not one of ``allowed`` ("" is all)."""
    if status not in allowed:
        raise ReviewError(f"status {status[:40]!r}: use one of {', '.join(s or 'all' for s in allowed)}", 422)


def _matches(item: dict[str, Any], status: str) -> bool:
    return (
        not status
        or (status == "open" and not item["decision"])
        or (status == "decided" and bool(item["decision"]))
        or (status == "flagged" and bool(item["flag"]))
    )


def _admin_matches(row: dict[str, Any], status: str) -> bool:
    if status in ("", "flagged"):
        return not status or bool(row["flags"])
    if status == "waiting":
        return bool(to_adjudicate(row)["any"])
    return (row["final"] or "undecided") == status


def markdown(text: str) -> str:
    """The guidelines as HTML: CommonMark with raw HTML escaped, unsafe link schemes refused."""
    from markdown_it import MarkdownIt

    return str(MarkdownIt("commonmark", {"html": False}).render(text))


def create_app(db: ReviewDB) -> FastAPI:
    """The review app over an open database."""
    env = _env()
    app = FastAPI(title="yanami review", docs_url=None, redoc_url=None, openapi_url=None)
    secret = secrets.token_bytes(32)

    def signin_token(value: str) -> str:
        return hmac.new(secret, value.encode(), hashlib.sha256).hexdigest()

    def page(
        request: Request, name: str, status: int = 200, session: Session | None = None, **ctx: object
    ) -> HTMLResponse:
        html = env.get_template(name).render(session=session, **ctx)
        return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})

    def error(request: Request, status: int, message: str) -> Response:
        if "application/json" in request.headers.get("accept", ""):
            return JSONResponse({"error": message}, status_code=status)
        return page(request, "error.html", status, message=message)

    @app.middleware("http")
    async def guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        length = request.headers.get("content-length")
        path = request.scope.get("path", "")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
            response: Response = error(request, 413, f"request body over {MAX_BODY} bytes")
        elif any(ord(ch) < 32 or 0xD800 <= ord(ch) <= 0xDFFF for ch in path):  # NUL and friends: no page has them
            response = error(request, 404, f"{path.encode('unicode_escape').decode()[:200]}: no such page")
        else:
            try:
                response = await call_next(request)
            except Unavailable as exc:  # raised while a response streams
                response = error(request, 503, str(exc))
        for k, v in _HEADERS.items():
            response.headers.setdefault(k, v)
        return response

    @app.exception_handler(ReviewError)
    async def _review_error(request: Request, exc: ReviewError) -> Response:
        return error(request, exc.status, str(exc))

    @app.exception_handler(404)
    async def _not_found(request: Request, exc: Exception) -> Response:
        return error(request, 404, f"{request.url.path}: no such page")

    @app.exception_handler(405)
    async def _bad_method(request: Request, exc: Exception) -> Response:
        return error(request, 405, f"{request.method} {request.url.path}: method not allowed")

    def session_of(request: Request) -> Session:
        cookie = request.cookies.get(COOKIE)
        session = db.session(cookie) if cookie else None
        if session is None:
            raise ReviewError("sign in first: open the sign-in link an admin gave you", 401)
        return session

    def same_origin(request: Request) -> None:
        """403 for a request another site's page sent (its ``Origin``, or the browser's ``Sec-Fetch-Site``)."""
        origin = request.headers.get("origin")
        if origin not in (None, "null") and urlsplit(origin).netloc != request.headers.get("host"):
            raise ReviewError(f"request from another site ({origin}) refused", 403)
        if request.headers.get("sec-fetch-site") in ("cross-site", "same-site"):
            raise ReviewError("request from another site refused", 403)

    async def changed(request: Request) -> tuple[Session, FormData]:
        """The session and form of a POST that may change something: CSRF and origin checked."""
        session = session_of(request)
        same_origin(request)
        form = await request.form()
        token = form.get("csrf")
        if not isinstance(token, str) or not hmac.compare_digest(token, session.csrf):
            raise ReviewError("missing or invalid CSRF token: reload the page and try again", 403)
        return session, form

    def text(form: FormData, name: str, *, required: bool = True) -> str:
        value = form.get(name)
        if value is None and not required:
            return ""
        if not isinstance(value, str) or (required and value == ""):
            raise ReviewError(f"form field {name!r}: missing", 422)
        return check_text(value.replace("\r\n", "\n"), f"form field {name!r}")

    def may_review(session: Session, dialogue_id: str) -> None:
        db.dialogue(dialogue_id)  # 404 first for an id that does not exist
        if not db.is_assigned(session.user, dialogue_id):
            raise ReviewError(f"dialogue {dialogue_id}: not assigned to you", 403)

    def may_view(session: Session, dialogue_id: str) -> None:
        if session.user.role is not Role.ADMIN:
            may_review(session, dialogue_id)

    def admin(session: Session) -> None:
        if session.user.role is not Role.ADMIN:
            raise ReviewError("admins only", 403)

    # sign in ----------------------------------------------------------------------------

    @app.get("/signin", response_class=HTMLResponse)
    async def signin_form(request: Request, token: str = "") -> Response:
        value = request.cookies.get(SIGNIN_COOKIE) or secrets.token_urlsafe(32)
        response = page(request, "signin.html", token=token, form_token=signin_token(value))
        response.set_cookie(
            SIGNIN_COOKIE, value, httponly=True, samesite="strict", secure=request.url.scheme == "https", path="/signin"
        )
        return response

    @app.post("/signin")
    async def signin(request: Request) -> Response:
        same_origin(request)
        form = await request.form()
        given, value = form.get("signin_csrf"), request.cookies.get(SIGNIN_COOKIE, "")
        if not isinstance(given, str) or not value or not hmac.compare_digest(given, signin_token(value)):
            raise ReviewError("sign in from the sign-in page: open your sign-in link again", 403)
        cookie, _ = db.redeem(text(form, "token"))
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            COOKIE,
            cookie,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        response.delete_cookie(SIGNIN_COOKIE, path="/signin", httponly=True, samesite="strict")
        return response

    @app.post("/signout")
    async def signout(request: Request) -> Response:
        await changed(request)
        db.sign_out(request.cookies.get(COOKIE, ""))
        response = RedirectResponse("/signin", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    # annotator ----------------------------------------------------------------------------

    @app.get("/", response_class=HTMLResponse)
    async def queue(request: Request, scenario: str = "", status: str = "") -> Response:
        session = session_of(request)
        items = db.queue(session.user)
        if session.user.role is Role.ADMIN and not items:  # an admin's home is the admin page
            return RedirectResponse("/admin", status_code=303)
        _known(status, STATUSES)
        scenarios = sorted({i["group"] for i in items})
        shown = [i for i in items if (not scenario or i["group"] == scenario) and _matches(i, status)]
        groups: dict[str, list[dict[str, Any]]] = {}
        for item in shown:
            groups.setdefault(item["group"], []).append(item)
        done = sum(1 for i in items if i["decision"])
        return page(
            request,
            "queue.html",
            session=session,
            groups=groups,
            done=done,
            total=len(items),
            shown=len(shown),
            scenarios=scenarios,
            scenario=scenario,
            status_filter=status,
            statuses=STATUSES,
        )

    @app.post("/d/{dialogue_id}/flag")
    async def flag(request: Request, dialogue_id: str) -> Response:
        session, form = await changed(request)
        may_review(session, dialogue_id)
        if form.get("unflag"):
            db.unflag(session.user, dialogue_id)
        else:
            db.flag(session.user, dialogue_id, text(form, "reason", required=False))
        return RedirectResponse(f"/d/{dialogue_id}#flag", status_code=303)

    @app.get("/guidelines", response_class=HTMLResponse)
    async def guidelines(request: Request) -> Response:
        session = session_of(request)
        text_, version = db.guidelines()
        return page(request, "guidelines.html", session=session, html=markdown(text_), source=text_, version=version)

    @app.post("/admin/guidelines")
    async def write_guidelines(request: Request) -> Response:
        session, form = await changed(request)
        admin(session)
        db.set_guidelines(text(form, "text", required=False), session.user)
        return RedirectResponse("/guidelines", status_code=303)

    @app.get("/d/{dialogue_id}", response_class=HTMLResponse)
    async def dialogue(request: Request, dialogue_id: str) -> Response:
        session = session_of(request)
        may_view(session, dialogue_id)
        data, version = db.dialogue(dialogue_id)
        verdicts = db.verdicts(dialogue_id)
        mine = verdicts.get(session.user.name, {"decision": None, "comment": "", "checks": {}})
        # blind review: the others' verdicts appear once one's own decision is in (admins see all)
        others_visible = session.user.role is Role.ADMIN or mine["decision"] is not None
        others = {n: v for n, v in verdicts.items() if n != session.user.name} if others_visible else {}
        assigned = db.is_assigned(session.user, dialogue_id)
        if assigned:
            db.opened(session.user, dialogue_id)
        flags = db.flags().get(dialogue_id, {})
        return page(
            request,
            "dialogue.html",
            my_flag=flags.get(session.user.name),
            flags=flags if others_visible else {},
            session=session,
            d=data,
            version=version,
            view=_view(data),
            mine=mine,
            others=others,
            others_visible=others_visible,
            assigned=assigned,
            edits=len(db.edits(dialogue_id)),
            verdict_values=[v.value for v in Verdict],
            decisions=[d.value for d in Decision],
        )

    @app.post("/d/{dialogue_id}/check")
    async def check(request: Request, dialogue_id: str) -> Response:
        session, form = await changed(request)
        may_review(session, dialogue_id)
        verdict = text(form, "verdict")
        if verdict not in {v.value for v in Verdict}:
            raise ReviewError(f"verdict {verdict[:40]!r}: use pass, fail, fix or skip", 422)
        check_id = text(form, "check_id")
        db.set_verdict(session.user, dialogue_id, check_id, Verdict(verdict), text(form, "comment", required=False))
        if "application/json" in request.headers.get("accept", ""):  # the page's script: no reload
            return JSONResponse({"check": check_id, "verdict": verdict})
        return RedirectResponse(f"/d/{dialogue_id}#check-{check_id}", status_code=303)

    @app.post("/d/{dialogue_id}/decision")
    async def decision(request: Request, dialogue_id: str) -> Response:
        session, form = await changed(request)
        may_review(session, dialogue_id)
        value = text(form, "decision")
        if value not in {d.value for d in Decision}:
            raise ReviewError(f"decision {value[:40]!r}: use approve, refine or reject", 422)
        db.decide(session.user, dialogue_id, Decision(value), text(form, "comment", required=False))
        return RedirectResponse(f"/d/{dialogue_id}", status_code=303)

    @app.post("/d/{dialogue_id}/edit")
    async def edit(request: Request, dialogue_id: str) -> Response:
        session, form = await changed(request)
        if session.user.role is not Role.ADMIN:
            may_review(session, dialogue_id)
        base = text(form, "base_version")
        if not base.isdigit():
            raise ReviewError(f"form field 'base_version': {base[:20]!r} is not a version number", 422)
        path, value = text(form, "path"), text(form, "value", required=False)
        try:
            db.edit(session.user, dialogue_id, int(base), path, value)
        except Conflict as c:
            return page(
                request,
                "conflict.html",
                409,
                session=session,
                c=c,
                diff=_diff(c.current, c.yours),
                dialogue_id=dialogue_id,
            )
        return RedirectResponse(f"/d/{dialogue_id}", status_code=303)

    @app.post("/d/{dialogue_id}/revert")
    async def revert(request: Request, dialogue_id: str) -> Response:
        session, form = await changed(request)
        if session.user.role is not Role.ADMIN:
            may_review(session, dialogue_id)
        numbers = {}
        for name in ("base_version", "to_version"):
            value = text(form, name)
            if not value.isdigit():
                raise ReviewError(f"form field {name!r}: {value[:20]!r} is not a version number", 422)
            numbers[name] = int(value)
        try:
            db.revert(session.user, dialogue_id, numbers["base_version"], numbers["to_version"])
        except Conflict as c:
            return page(request, "conflict.html", 409, session=session, c=c, diff=[], dialogue_id=dialogue_id)
        return RedirectResponse(f"/d/{dialogue_id}/history", status_code=303)

    @app.get("/d/{dialogue_id}/history", response_class=HTMLResponse)
    async def history(request: Request, dialogue_id: str) -> Response:
        session = session_of(request)
        may_view(session, dialogue_id)
        _, version = db.dialogue(dialogue_id)
        edits = [(e, _diff(e.before, e.after)) for e in db.edits(dialogue_id)]
        may_edit = session.user.role is Role.ADMIN or db.is_assigned(session.user, dialogue_id)
        return page(
            request,
            "history.html",
            session=session,
            dialogue_id=dialogue_id,
            edits=edits,
            version=version,
            may_edit=may_edit,
            revert_prefix=REVERT,
        )

    @app.get("/image/{sha256}")
    async def image(request: Request, sha256: str) -> Response:
        session = session_of(request)
        path, fmt_ = db.image(sha256, session.user)
        if not path.is_file():
            raise ReviewError(f"image {sha256}: its file is missing from the dataset", 404)
        return FileResponse(
            path,
            media_type=_MEDIA.get(fmt_, "application/octet-stream"),
            headers={"Cache-Control": "private, max-age=31536000, immutable"},
        )

    @app.get("/favicon.ico")
    async def favicon() -> Response:
        return Response(status_code=204)

    @app.get("/static/{name}")
    async def static(name: str) -> Response:
        if name not in ("review.css", "review.js"):
            raise ReviewError(f"/static/{name}: no such file", 404)
        media = "text/css" if name.endswith(".css") else "text/javascript"
        return FileResponse(STATIC / name, media_type=media)

    # admin --------------------------------------------------------------------------------

    @app.get("/admin", response_class=HTMLResponse)
    async def admin_page(request: Request) -> Response:
        session = session_of(request)
        admin(session)
        rows = db.table()
        annotators = [u.name for u in db.users() if u.role is Role.ANNOTATOR]
        progress = {
            name: {
                "assigned": sum(1 for r in rows if name in r["assigned"]),
                "decided": sum(1 for r in rows if name in r["decisions"]),
                "median_s": median_seconds(rows, name),
            }
            for name in annotators
        }
        open_items = [(r, what) for r in rows if (what := to_adjudicate(r))["any"]]
        open_items.sort(key=lambda rw: (-rw[1]["decisions"], -len(rw[1]["failed"]), -len(rw[1]["checks"]), rw[0]["id"]))
        settled = [r for r in rows if (r["adjudicated"] or r["check_adjudicated"]) and not to_adjudicate(r)["any"]]
        scenario, status = request.query_params.get("scenario", ""), request.query_params.get("status", "")
        _known(status, ADMIN_STATUSES)
        listed = [r for r in rows if (not scenario or r["group"] == scenario) and _admin_matches(r, status)]
        return page(
            request,
            "admin.html",
            session=session,
            listed=listed,
            scenarios=sorted({r["group"] for r in rows}),
            scenario=scenario,
            status_filter=status,
            statuses=ADMIN_STATUSES,
            progress=progress,
            disputed=open_items,
            settled=settled,
            agreement=agreement(rows),
            rows=rows,
        )

    @app.get("/admin/d/{dialogue_id}", response_class=HTMLResponse)
    async def adjudication(request: Request, dialogue_id: str) -> Response:
        session = session_of(request)
        admin(session)
        data, _ = db.dialogue(dialogue_id)
        row = next(r for r in db.table() if r["id"] == dialogue_id)
        verdicts = db.verdicts(dialogue_id)
        checks = []
        for t in data["turns"]:
            pictures = [p["sha256"] for p in t["assistant"]["parts"] if p["type"] == "image"]
            for c in t["checks"]:
                given = [v["checks"][c["id"]][0] for v in verdicts.values() if c["id"] in v["checks"]]
                votes = {g for g in given if g != Verdict.SKIP.value}
                checks.append(
                    {
                        **c,
                        "turn": t["index"] + 1,
                        "pictures": pictures,
                        "split": len(votes) > 1,
                        "failed": c["id"] in row["failed_checks"],
                        "adjudicated": row["check_adjudicated"].get(c["id"]),
                    }
                )
        return page(
            request,
            "adjudicate.html",
            session=session,
            row=row,
            verdicts=verdicts,
            checks=checks,
            decisions=[d.value for d in Decision],
            history=db.verdict_history(dialogue_id),
        )

    @app.post("/admin/d/{dialogue_id}/adjudicate")
    async def adjudicate(request: Request, dialogue_id: str) -> Response:
        session, form = await changed(request)
        admin(session)
        value = text(form, "decision")
        if value not in {d.value for d in Decision}:
            raise ReviewError(f"decision {value[:40]!r}: use approve, refine or reject", 422)
        db.adjudicate(session.user, dialogue_id, Decision(value), text(form, "comment", required=False))
        return RedirectResponse("/admin", status_code=303)

    @app.post("/admin/d/{dialogue_id}/check")
    async def adjudicate_check(request: Request, dialogue_id: str) -> Response:
        session, form = await changed(request)
        admin(session)
        value, check_id = text(form, "verdict"), text(form, "check_id")
        if value not in (Verdict.PASS.value, Verdict.FAIL.value):
            raise ReviewError(f"verdict {value[:40]!r}: adjudicate a check with pass or fail", 422)
        db.adjudicate_check(session.user, dialogue_id, check_id, Verdict(value), text(form, "comment", required=False))
        return RedirectResponse(f"/admin/d/{dialogue_id}#check-{check_id}", status_code=303)

    return app
